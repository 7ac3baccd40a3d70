//go:build trajring_cuda

package gpu

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// slot is one pinned host staging buffer and the device buffer it is
// copied into: a launch's parameter block (column descriptors, indices,
// windows, pad steps and, for Scatter, the source steps) is written to
// host, copied by one asynchronous H2D and read by one kernel. The event
// recorded after the kernel tells when the slot may be reused.
type slot struct {
	host    unsafe.Pointer
	dev     cu.DevicePtr
	cap     int64
	ev      cu.Event
	pending bool
	small   int // consecutive uses that needed less than a quarter of cap
}

func (s *slot) bytes(n int64) []byte { return unsafe.Slice((*byte)(s.host), n) }

// record marks the slot busy until the work queued so far on stream ends.
func (s *slot) record(stream cu.Stream) error {
	if err := s.ev.Record(stream); err != nil {
		return driverErr("cuEventRecord", err)
	}
	s.pending = true
	return nil
}

func (s *slot) free() error {
	var first error
	if s.host != nil {
		first = driverErr("cuMemFreeHost", cu.MemFreeHost(s.host))
		s.host = nil
	}
	if s.dev != 0 {
		if err := driverErr("cuMemFree", cu.MemFree(s.dev)); first == nil {
			first = err
		}
		s.dev = 0
	}
	s.cap = 0
	return first
}

// shrinkAbove is the size above which a staging slot is given back when
// shrinkAfter launches in a row need less than a quarter of it: pinned
// memory is scarce, but a slot that a large launch comes back to now and
// then keeps its size, since every free and allocation makes a real
// driver serialise the context's streams. A variable for tests.
var shrinkAbove int64 = 16 << 20

const shrinkAfter = 64

// slot returns the next staging slot with room for n bytes, waiting for
// its previous use to finish and growing (or shrinking) it if needed. It
// runs with the backend entered.
func (b *Backend) slot(n int64) (*slot, error) {
	if b.capturing {
		// A real driver would record the copy from the slot into the
		// graph, and every replay would copy whatever the slot then held.
		return nil, fmt.Errorf("%w: a staged copy to the device during a graph capture (make it before capturing)", ErrDriver)
	}
	s := &b.slots[b.next]
	b.next = (b.next + 1) % len(b.slots)
	if s.pending {
		// Usually long done: ask first, and block only when it is not.
		if done, err := eventDone(s.ev); err != nil {
			return nil, err
		} else if !done {
			if err := s.ev.Synchronize(); err != nil {
				return nil, driverErr("cuEventSynchronize", err)
			}
		}
		s.pending = false
	}
	// Keep the slot unless it is too small, or a large slot (grown by one
	// big export, say) has served only much smaller launches for a while.
	if n <= s.cap {
		if s.cap <= shrinkAbove || n >= s.cap/4 {
			s.small = 0
			return s, nil
		}
		if s.small++; s.small < shrinkAfter {
			return s, nil
		}
	}
	s.small = 0
	if err := s.free(); err != nil {
		return nil, err
	}
	c := max(n, 64<<10)
	c = (c + 4095) &^ 4095
	h, err := hostAlloc(c)
	if err != nil {
		return nil, err
	}
	d, err := cu.MemAlloc(c)
	if err != nil {
		_ = cu.MemFreeHost(h)
		return nil, driverErr("cuMemAlloc (staging)", err)
	}
	s.host, s.dev, s.cap = h, d, c
	return s, nil
}

// layout plans a parameter block: sections at 16-byte aligned offsets, so
// that 16-byte vector loads can read staged steps.
type layout struct{ n int64 }

func (l *layout) add(size int64) int64 {
	off := (l.n + 15) &^ 15
	l.n = off + size
	return off
}
