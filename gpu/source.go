//go:build trajring_cuda

package gpu

import (
	"fmt"

	"gorgonia.org/tensor"
)

// sources is the Backend's state for device sources of ScatterFrom: the
// arenas that held recent sources (a producer writes the same tensors
// step after step, so the arena of a source is found without walking
// every arena) and the per-call device address of each column's source.
// It is guarded by the backend's mutex.
type sources struct {
	hint [4]*Arena
	next int
	addr []uint64 // ScatterFrom: column c's source address, 0 for a host source
}

// CheckSource reports an error unless t is a device tensor (IsDevice)
// whose first n bytes lie within one live arena of this backend: the
// memory ScatterFrom can read on the device. Memory of another Backend,
// of the host, or allocated outside trajring is refused (ErrArena), as is
// a tensor smaller than n bytes (ErrBounds). It makes no driver call and
// is safe for concurrent use.
func (b *Backend) CheckSource(t *tensor.Dense, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	_, _, err := b.source(t, n)
	return err
}

// source returns the arena that holds the first n bytes of the device
// tensor t and their device address. It runs with b.mu held and
// allocates only on error.
func (b *Backend) source(t *tensor.Dense, n int64) (*Arena, uint64, error) {
	if !IsDevice(t) {
		return nil, 0, fmt.Errorf("%w: source is not a device tensor of a gpu backend", ErrArena)
	}
	if n < 0 || int64(t.MemSize()) < n {
		return nil, 0, fmt.Errorf("%w: source of %d bytes, %d needed", ErrBounds, t.MemSize(), n)
	}
	p := uint64(t.Uintptr())
	for _, a := range b.src.hint {
		if a != nil && a.owner == b && !a.freed && holds(a, p, n) {
			return a, p, nil
		}
	}
	for a := range b.arenas {
		if holds(a, p, n) {
			b.src.hint[b.src.next] = a
			b.src.next = (b.src.next + 1) % len(b.src.hint)
			return a, p, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: %d source bytes at device address %#x lie in no live arena of this backend", ErrArena, n, p)
}

// holds reports whether the n bytes at device address p lie within a
// (a non-empty arena).
func holds(a *Arena, p uint64, n int64) bool {
	base := uint64(a.ptr)
	return a.size > 0 && p >= base && p-base <= uint64(a.size) && uint64(n) <= uint64(a.size)-(p-base)
}
