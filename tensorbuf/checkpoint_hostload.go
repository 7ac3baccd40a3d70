package tensorbuf

import (
	"io"
	"sync"
)

// hostArena is an arena in host memory that exposes its bytes, as the
// cpu backend's arenas do (cpu.Arena.Bytes). Load reads such arenas in
// place instead of through a staging buffer and Backend.Upload.
type hostArena interface {
	Bytes() []byte
}

// prefaultAhead is how far (in bytes) the prefaulting goroutine of
// readHostArena may run ahead of the reader.
const prefaultAhead = 16 * ckptChunk

// readHostArena reads the section of ring arena c, the bytes of its
// spans in order, straight into dst, the arena's memory: uncompressed
// chunks are read from the file into place (one copy, none through
// staging) and their checksums verified on a second goroutine while the
// next chunk is read; compressed chunks are checked, then decoded into
// place (through a scratch buffer when a chunk spans several spans). A
// third goroutine asks the kernel to populate the spans' pages ahead of
// the reader (prefault), so that the zeroing of new pages overlaps the
// reads instead of stalling them. On any error the arena holds unverified
// bytes: the caller discards the buffer.
func readHostArena(cr *chunkReader, c uint32, dst []byte, spans []span) error {
	size := spansLen(spans)
	// The reader publishes how far it has read; the prefaulter stays at
	// most prefaultAhead beyond it and stops when told.
	progress := make(chan int64, 64)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		var read int64
		walk := spanWalk{sp: spans}
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
			n := min(ckptChunk, size-off)
			_ = walk.next(n, func(at, lo, hi int64) error {
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

	jobs := make(chan chunkHead, 2*ckptPipeline)
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
	var stored, scratch []byte
	walk := spanWalk{sp: spans}
	err := func() error {
		for off := int64(0); ; {
			h, err := cr.head(secArena, c)
			if err != nil {
				return err
			}
			n, last := int64(h.rawLen), h.flags&chunkLast != 0
			switch {
			case n > size-off:
				return corrupt(secArena, c, "more than the %d bytes of its stored steps", size)
			case last && off+n != size:
				return corrupt(secArena, c, "%d bytes for stored steps of %d", off+n, size)
			}
			// The chunk's places in the arena: one, unless it spans spans.
			var places [][]byte
			_ = walk.next(n, func(at, lo, hi int64) error {
				places = append(places, dst[at:at+hi-lo:at+hi-lo])
				return nil
			})
			if h.flags&chunkZstd == 0 {
				for i, place := range places {
					if _, err := io.ReadFull(cr.r, place); err != nil {
						return readFailed(secArena, c, err, "chunk %d's payload", h.seq)
					}
					if i == 0 {
						h.payload = place
					} else {
						h.pieces = append(h.pieces, place)
					}
				}
				jobs <- h
			} else {
				p := grow(&stored, int(h.stored))
				if _, err := io.ReadFull(cr.r, p); err != nil {
					return readFailed(secArena, c, err, "chunk %d's payload", h.seq)
				}
				if err := h.check(p); err != nil {
					return err
				}
				if len(places) == 1 {
					if _, err := cr.decode(&h, p, &places[0]); err != nil {
						return err
					}
				} else {
					raw, err := cr.decode(&h, p, &scratch)
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
