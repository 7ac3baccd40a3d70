//go:build trajring_cuda

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// pinnedBlock is one AllocPinned or AllocSource block.
type pinnedBlock struct {
	p      unsafe.Pointer
	n      int64
	source bool // from AllocSource: Scatter reads it by DMA, uncopied
}

// AllocPinned returns n bytes of page-locked host memory for HostInto,
// owned by the backend until FreePinned or Close. It is safe for
// concurrent use.
func (b *Backend) AllocPinned(n int64) ([]byte, error) { return b.allocPinned(n, false) }

func (b *Backend) allocPinned(n int64, source bool) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: pinned alloc of %d bytes", ErrBounds, n)
	}
	err := b.enter()
	if err != nil {
		return nil, err
	}
	defer b.exit()
	p, err := hostAlloc(n)
	if err != nil {
		return nil, err
	}
	b.pinned = append(b.pinned, pinnedBlock{p, n, source})
	return unsafe.Slice((*byte)(p), n), nil
}

// AllocSource returns n bytes of page-locked host memory for the fields
// of steps to add, owned by the backend until FreePinned or Close. A
// Scatter (Writer.Add) whose source bytes lie in it copies nothing on the
// host: it queues a DMA copy from this memory on the backend's stream, so
// the call returns after a driver call instead of a copy of the step.
// The device reads the bytes when that work runs, so, as with a device
// source, do not write the memory until an event recorded after the Add
// (Record, then Done or Synchronize) has completed, or Sync has returned:
// a double-buffered environment writes the next step into a second
// block meanwhile. Memory from AllocPinned keeps being copied at the
// call, as any Go memory is. It is safe for concurrent use.
func (b *Backend) AllocSource(n int64) ([]byte, error) { return b.allocPinned(n, true) }

// pinnedIn reports whether the n bytes at p lie inside one pinned block,
// and whether that block is from AllocSource. It runs with the backend
// entered.
func (b *Backend) pinnedIn(p unsafe.Pointer, n int64) (in, source bool) {
	for _, blk := range b.pinned {
		if base := uintptr(blk.p); uintptr(p) >= base && uintptr(p)-base+uintptr(n) <= uintptr(blk.n) {
			return true, blk.source
		}
	}
	return false, false
}

// FreePinned waits for the backend's queued work (a HostInto may still
// write the memory, a Scatter still read it) and frees memory from
// AllocPinned or AllocSource.
func (b *Backend) FreePinned(buf []byte) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	for i, blk := range b.pinned {
		if len(buf) > 0 && unsafe.Pointer(&buf[0]) == blk.p {
			if err := b.syncStream(); err != nil {
				return err
			}
			b.pinned = append(b.pinned[:i], b.pinned[i+1:]...)
			return driverErr("cuMemFreeHost", cu.MemFreeHost(blk.p))
		}
	}
	return fmt.Errorf("%w: memory not from AllocPinned", ErrArena)
}

// HostInto queues an asynchronous copy of len(dst) bytes of src from byte
// offset off into dst, which must lie inside memory from this backend's
// AllocPinned, on the backend's stream, and returns at once: dst holds
// the bytes once an event recorded after it has completed (Record, then
// Synchronize or Done) or after Sync. It allocates nothing. It is safe
// for concurrent use.
func (b *Backend) HostInto(dst []byte, src kernels.Arena, off int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	d, err := b.arena(src)
	if err != nil {
		return err
	}
	return b.hostInto(dst, d, off)
}

// TensorInto is HostInto from the device tensor t of this backend: it
// queues a copy of t's first len(dst) bytes into dst (memory from
// AllocPinned) and returns at once; dst holds them after an event
// recorded after it, a Sync or a Download (which waits for the stream).
// It allocates nothing. It is safe for concurrent use.
func (b *Backend) TensorInto(dst []byte, t *tensor.Dense) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	d, p, err := b.source(t, int64(len(dst)))
	if err != nil {
		return err
	}
	return b.hostInto(dst, d, int64(p-uint64(d.ptr)))
}

// hostInto is HostInto with the backend entered.
func (b *Backend) hostInto(dst []byte, d *Arena, off int64) error {
	n := int64(len(dst))
	if off < 0 || off > d.size || n > d.size-off {
		return fmt.Errorf("%w: HostInto of %d bytes at %d from %d", ErrBounds, n, off, d.size)
	}
	if n == 0 {
		return nil
	}
	if ok, _ := b.pinnedIn(unsafe.Pointer(&dst[0]), n); !ok {
		return fmt.Errorf("%w: HostInto destination is not memory from AllocPinned", ErrBounds)
	}
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), d.ptr+cu.DevicePtr(off), n, b.stream); err != nil {
		return driverErr("cuMemcpyDtoHAsync", err)
	}
	b.countToHost(n)
	return nil
}
