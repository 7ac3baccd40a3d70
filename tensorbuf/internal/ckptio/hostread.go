package ckptio

import (
	"io"
	"sync"

	"github.com/trajring/trajring/internal/scratch"
)

// prefaultAhead is how far (in bytes) the prefaulting goroutine of
// ReadSpansInto may run ahead of the reader.
const prefaultAhead = 16 * Chunk

// ReadSpansInto reads section sec/index, which holds the bytes of spans
// in order, straight into dst at those spans (host memory the caller
// owns, such as a cpu arena): uncompressed chunks are read from the
// stream into place (one copy, none through staging) and their checksums
// verified on a second goroutine while the next chunk is read;
// compressed chunks are checked, then decoded into place (through a
// scratch buffer when a chunk spans several spans). A third goroutine
// asks the kernel to populate the spans' pages ahead of the reader
// (prefault), so that the zeroing of new pages overlaps the reads
// instead of stalling them. Sizes are checked as by ReadSpans. On any
// error dst holds unverified bytes: the caller discards it.
func (cr *Reader) ReadSpansInto(sec uint8, c uint32, dst []byte, spans []Span) error {
	size := SpansLen(spans)
	// The reader publishes how far it has read; the prefaulter stays at
	// most prefaultAhead beyond it and stops when told.
	progress := make(chan int64, 64)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		var read int64
		walk := SpanWalk{sp: spans}
		for off := int64(0); off < size; {
			for off >= read+prefaultAhead {
				r, ok := <-progress
				if !ok {
					return
				}
				read = r
			}
			select {
			case r, ok := <-progress:
				if !ok {
					return
				}
				read = r
				continue
			default:
			}
			n := min(Chunk, size-off)
			_ = walk.Next(n, func(at, lo, hi int64) error {
				prefault(dst[at : at+hi-lo])
				return nil
			})
			off += n
		}
		for range progress {
		}
	}()
	defer pwg.Wait()
	defer close(progress)

	jobs := make(chan chunkHead, 2*Pipeline)
	var verr error
	var vwg sync.WaitGroup
	vwg.Add(1)
	go func() {
		defer vwg.Done()
		for j := range jobs {
			if verr == nil {
				verr = j.check(j.payload, j.pieces...)
			}
		}
	}()
	var stored, buf []byte
	walk := SpanWalk{sp: spans}
	err := func() error {
		for off := int64(0); ; {
			h, err := cr.head(sec, c)
			if err != nil {
				return err
			}
			n, last := int64(h.rawLen), h.flags&FlagLast != 0
			switch {
			case n > size-off:
				return Corrupt(sec, c, "more than the %d bytes of its stored steps", size)
			case last && off+n != size:
				return Corrupt(sec, c, "%d bytes for stored steps of %d", off+n, size)
			}
			// The chunk's places in dst: one, unless it spans spans.
			var places [][]byte
			_ = walk.Next(n, func(at, lo, hi int64) error {
				places = append(places, dst[at:at+hi-lo:at+hi-lo])
				return nil
			})
			if h.flags&FlagZstd == 0 {
				for i, place := range places {
					if _, err := io.ReadFull(cr.r, place); err != nil {
						return readFailed(sec, c, err, "chunk %d's payload", h.seq)
					}
					if i == 0 {
						h.payload = place
					} else {
						h.pieces = append(h.pieces, place)
					}
				}
				jobs <- h
			} else {
				p := scratch.Grow(&stored, int(h.stored))
				if _, err := io.ReadFull(cr.r, p); err != nil {
					return readFailed(sec, c, err, "chunk %d's payload", h.seq)
				}
				if err := h.check(p); err != nil {
					return err
				}
				if len(places) == 1 {
					if _, err := cr.decode(&h, p, &places[0]); err != nil {
						return err
					}
				} else {
					raw, err := cr.decode(&h, p, &buf)
					if err != nil {
						return err
					}
					for _, place := range places {
						raw = raw[copy(place, raw):]
					}
				}
			}
			cr.seq++
			cr.raw += n
			off += n
			select {
			case progress <- off:
			default:
			}
			if last {
				return nil
			}
		}
	}()
	close(jobs)
	vwg.Wait()
	if verr != nil { // an earlier chunk than a read error's
		err = verr
	}
	return err
}
