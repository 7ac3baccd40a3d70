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

// readHostArena reads the section of column c straight into dst, the
// arena's memory: uncompressed chunks are read from the file into place
// (one copy, none through staging) and their checksums verified on a
// second goroutine while the next chunk is read; compressed chunks are
// checked, then decoded into place. A third goroutine asks the kernel to
// populate the arena's pages ahead of the reader (prefault), so that the
// zeroing of new pages overlaps the reads instead of stalling them. On
// any error the arena holds unverified bytes: the caller discards the
// buffer.
func readHostArena(cr *chunkReader, c uint32, dst []byte) error {
	size := int64(len(dst))
	// The reader publishes how far it has read; the prefaulter stays at
	// most prefaultAhead beyond it and stops when told.
	progress := make(chan int64, 64)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		var read int64
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
			prefault(dst[off : off+n])
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
				verr = j.check(j.payload)
			}
		}
	}()
	var stored []byte
	err := func() error {
		for off := int64(0); ; {
			h, err := cr.head(secArena, c)
			if err != nil {
				return err
			}
			n, last := int64(h.rawLen), h.flags&chunkLast != 0
			switch {
			case n > size-off:
				return corrupt(secArena, c, "more than the arena's %d bytes", size)
			case last && off+n != size:
				return corrupt(secArena, c, "%d bytes for an arena of %d", off+n, size)
			}
			place := dst[off : off+n : off+n]
			if h.flags&chunkZstd == 0 {
				if _, err := io.ReadFull(cr.r, place); err != nil {
					return corrupt(secArena, c, "chunk %d: truncated payload: %v", h.seq, err)
				}
				h.payload = place
				jobs <- h
			} else {
				p := grow(&stored, int(h.stored))
				if _, err := io.ReadFull(cr.r, p); err != nil {
					return corrupt(secArena, c, "chunk %d: truncated payload: %v", h.seq, err)
				}
				if err := h.check(p); err != nil {
					return err
				}
				if _, err := cr.decode(&h, p, &place); err != nil {
					return err
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
