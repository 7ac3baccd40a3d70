//go:build trajring_cuda

package gpu

import (
	"fmt"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// CopyIn queues a copy of n bytes from src, a device address of the
// backend's context that another allocator owns (a PyTorch tensor, say),
// into dst at byte offset off, on the backend's stream after the work
// queued so far; it does not wait. The caller orders the copy after the
// work that writes src (AfterConsumer) and keeps src alive until the
// stream has run it. It lets device data of other libraries reach
// trajring's kernels without a round trip through the host.
func (b *Backend) CopyIn(dst kernels.Arena, off int64, src uintptr, n int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	d, err := b.arena(dst)
	if err != nil {
		return err
	}
	if off < 0 || n < 0 || off > d.size || n > d.size-off {
		return fmt.Errorf("%w: copy of %d bytes at %d into %d", ErrBounds, n, off, d.size)
	}
	if n == 0 {
		return nil
	}
	if src == 0 {
		return fmt.Errorf("%w: copy from device address 0", ErrBounds)
	}
	return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(d.ptr+cu.DevicePtr(off), cu.DevicePtr(src), n, b.stream))
}
