//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// pinnedBlock is one AllocPinned block.
type pinnedBlock struct {
	p unsafe.Pointer
	n int64
}

// AllocPinned returns n bytes of page-locked host memory for HostInto,
// owned by the backend until FreePinned or Close. It is safe for
// concurrent use.
func (b *Backend) AllocPinned(n int64) ([]byte, error) {
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
	b.pinned = append(b.pinned, pinnedBlock{p, n})
	return unsafe.Slice((*byte)(p), n), nil
}

// FreePinned waits for the backend's queued work (a HostInto may still
// write the memory) and frees memory from AllocPinned.
func (b *Backend) FreePinned(buf []byte) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	for i, blk := range b.pinned {
		if len(buf) > 0 && unsafe.Pointer(&buf[0]) == blk.p {
			if err := driverErr("cuStreamSynchronize", b.stream.Synchronize()); err != nil {
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
	n := int64(len(dst))
	if off < 0 || off > d.size || n > d.size-off {
		return fmt.Errorf("%w: HostInto of %d bytes at %d from %d", ErrBounds, n, off, d.size)
	}
	if n == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(&dst[0]))
	ok := false
	for _, blk := range b.pinned {
		if base := uintptr(blk.p); p >= base && p-base+uintptr(n) <= uintptr(blk.n) {
			ok = true
			break
		}
	}
	if !ok {
		return fmt.Errorf("%w: HostInto destination is not memory from AllocPinned", ErrBounds)
	}
	return driverErr("cuMemcpyDtoHAsync", cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), d.ptr+cu.DevicePtr(off), n, b.stream))
}
