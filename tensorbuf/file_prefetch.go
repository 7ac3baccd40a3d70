package tensorbuf

import (
	"time"

	"github.com/trajring/trajring/cpu"
)

// Prefetch of cold windows. A sample of B windows from a file-backed
// buffer whose pages are not in memory would fault them in one at a time,
// each fault a disk read waited for (about 250 µs on a virtio disk, so
// 64 ms for B=256). Asking the kernel for every window's pages first
// (MADV_WILLNEED, which queues the reads without waiting) lets the disk
// serve them together. On resident pages the advice is wasted system
// calls (about 1 µs a window, against 11 µs for a whole resident sample),
// so it is adaptive: a gather slower than prefetchSlow per window turns it
// on, and a prefetched gather faster than prefetchFast per window (the
// pages were resident) turns it off again.
const (
	prefetchSlow = 20 * time.Microsecond
	prefetchFast = 2 * time.Microsecond
)

// beforeGather prefetches the windows' pages when the buffer is cold and
// returns the time the gather starts (zero for a buffer in memory).
// Called with b.mu held for reading.
func (fs *fileStore) beforeGather(b *Buffer, wins []Window) time.Time {
	if fs == nil || len(wins) < 8 {
		return time.Time{}
	}
	if fs.prefetch.Load() {
		for i := range b.arenas {
			a := b.arenas[i].arena.(*cpu.Arena)
			st := b.arenas[i].stride
			for _, w := range wins {
				s := w.Start % b.capacity
				n := min(w.Len, b.capacity-s)
				base := w.Row * b.capacity
				a.WillNeed((base+s)*st, n*st)
				if n < w.Len { // the window wraps to the row's first slots
					a.WillNeed(base*st, (w.Len-n)*st)
				}
			}
		}
	}
	return time.Now()
}

// afterGather turns prefetching on or off from the gather's time.
func (fs *fileStore) afterGather(start time.Time, n int) {
	if fs == nil || start.IsZero() {
		return
	}
	per := time.Since(start) / time.Duration(n)
	switch on := fs.prefetch.Load(); {
	case !on && per > prefetchSlow:
		fs.prefetch.Store(true)
	case on && per < prefetchFast:
		fs.prefetch.Store(false)
	}
}
