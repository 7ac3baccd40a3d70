//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// Arena is a block of device memory allocated by a Backend. Its size never
// changes; it is valid until freed (by Free or by the backend's Close).
type Arena struct {
	ptr   cu.DevicePtr
	size  int64
	owner *Backend
	freed bool // owned by the owner's worker goroutine
}

// Size returns the arena's length in bytes. It is safe for concurrent use.
func (a *Arena) Size() int64 { return a.size }

// Ptr returns the device address of the arena's first byte (0 for an empty
// arena), for handing the memory to other CUDA code. It is safe for
// concurrent use.
func (a *Arena) Ptr() cu.DevicePtr { return a.ptr }

// arena checks that a is a live arena of this backend; it runs on the
// worker.
func (b *Backend) arena(a kernels.Arena) (*Arena, error) {
	d, ok := a.(*Arena)
	if !ok || d == nil || d.owner != b || d.freed {
		return nil, fmt.Errorf("%w: %T", ErrArena, a)
	}
	return d, nil
}

// Alloc returns a zeroed arena of n bytes of device memory. When the
// device has too little free memory it returns an error wrapping
// ErrOutOfMemory that says how much was asked for and how much is free.
func (b *Backend) Alloc(n int64) (kernels.Arena, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc of %d bytes", ErrBounds, n)
	}
	c := newCall(opAlloc)
	c.n = n
	err := b.do(c)
	a := c.arena
	c.put()
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (b *Backend) alloc(c *call) error {
	a := &Arena{size: c.n, owner: b}
	if c.n > 0 {
		p, err := cu.MemAlloc(c.n)
		if err != nil {
			if errors.Is(err, cu.OutOfMemory) {
				free, total, _ := cu.MemInfo()
				return fmt.Errorf("%w: alloc of %d bytes on %s (%d of %d bytes free)", ErrOutOfMemory, c.n, b.devName, free, total)
			}
			return driverErr("cuMemAlloc", err)
		}
		if err := cu.MemsetD8Async(p, 0, c.n, b.stream); err != nil {
			_ = cu.MemFree(p)
			return driverErr("cuMemsetD8Async", err)
		}
		a.ptr = p
	}
	b.arenas[a] = struct{}{}
	c.arena = a
	return nil
}

// Free waits for work that may use the arena, then releases it. Using it
// afterwards is an error.
func (b *Backend) Free(a kernels.Arena) error {
	c := newCall(opFree)
	c.a = a
	return b.run(c)
}

func (b *Backend) free(a kernels.Arena) error {
	d, err := b.arena(a)
	if err != nil {
		return err
	}
	if err := driverErr("cuStreamSynchronize", b.stream.Synchronize()); err != nil {
		return err
	}
	return b.freeArena(d)
}

func (b *Backend) freeArena(d *Arena) error {
	delete(b.arenas, d)
	d.freed = true
	if d.ptr == 0 {
		return nil
	}
	p := d.ptr
	d.ptr = 0
	return driverErr("cuMemFree", cu.MemFree(p))
}

// Upload copies src into dst at byte offset off. Up to 16 MiB go through
// pinned staging and are copied asynchronously (src may be reused at
// once); larger uploads wait for queued work and copy synchronously.
func (b *Backend) Upload(dst kernels.Arena, off int64, src []byte) error {
	c := newCall(opUpload)
	c.a, c.off, c.buf = dst, off, src
	return b.run(c)
}

func (b *Backend) upload(dst kernels.Arena, off int64, src []byte) error {
	d, err := b.arena(dst)
	if err != nil {
		return err
	}
	n := int64(len(src))
	if off < 0 || off > d.size || n > d.size-off {
		return fmt.Errorf("%w: upload of %d bytes at %d into %d", ErrBounds, n, off, d.size)
	}
	if n == 0 {
		return nil
	}
	if n > maxStagedUpload {
		if err := driverErr("cuStreamSynchronize", b.stream.Synchronize()); err != nil {
			return err
		}
		return driverErr("cuMemcpyHtoD", cu.MemcpyHtoD(d.ptr+cu.DevicePtr(off), unsafe.Pointer(&src[0]), n))
	}
	s, err := b.slot(n)
	if err != nil {
		return err
	}
	copy(s.bytes(n), src)
	if err := cu.MemcpyHtoDAsync(d.ptr+cu.DevicePtr(off), s.host, n, b.stream); err != nil {
		return driverErr("cuMemcpyHtoDAsync", err)
	}
	return s.record(b.stream)
}

// Download waits for the work queued so far, then copies len(dst) bytes
// of src from byte offset off into dst.
func (b *Backend) Download(dst []byte, src kernels.Arena, off int64) error {
	c := newCall(opDownload)
	c.buf, c.a, c.off = dst, src, off
	return b.run(c)
}

func (b *Backend) download(dst []byte, src kernels.Arena, off int64) error {
	d, err := b.arena(src)
	if err != nil {
		return err
	}
	n := int64(len(dst))
	if off < 0 || off > d.size || n > d.size-off {
		return fmt.Errorf("%w: download of %d bytes at %d from %d", ErrBounds, n, off, d.size)
	}
	if err := driverErr("cuStreamSynchronize", b.stream.Synchronize()); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return driverErr("cuMemcpyDtoH", cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), d.ptr+cu.DevicePtr(off), n))
}

// Copy queues a device-to-device copy of n bytes from src at byte offset
// srcOff to dst at dstOff on the backend's stream. The ranges must not
// overlap. It is the ceiling the kernels are measured against.
func (b *Backend) Copy(dst kernels.Arena, dstOff int64, src kernels.Arena, srcOff, n int64) error {
	c := newCall(opCopy)
	c.a, c.off, c.a2, c.off2, c.n = dst, dstOff, src, srcOff, n
	return b.run(c)
}

func (b *Backend) copyDtoD(dst kernels.Arena, dstOff int64, src kernels.Arena, srcOff, n int64) error {
	d, err := b.arena(dst)
	if err != nil {
		return err
	}
	s, err := b.arena(src)
	if err != nil {
		return err
	}
	if n < 0 || dstOff < 0 || srcOff < 0 || dstOff > d.size || srcOff > s.size || n > d.size-dstOff || n > s.size-srcOff {
		return fmt.Errorf("%w: copy of %d bytes from %d of %d to %d of %d", ErrBounds, n, srcOff, s.size, dstOff, d.size)
	}
	if d == s && dstOff < srcOff+n && srcOff < dstOff+n {
		return fmt.Errorf("%w: overlapping copy of %d bytes from %d to %d", ErrBounds, n, srcOff, dstOff)
	}
	if n == 0 {
		return nil
	}
	return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(d.ptr+cu.DevicePtr(dstOff), s.ptr+cu.DevicePtr(srcOff), n, b.stream))
}

// Tensor returns a tensor of the given dtype and shape viewing the arena's
// device memory from byte offset off, without copying. Its data must not
// be read on the host: copy it with Download (which waits for the work
// that writes it). It is valid until the arena is freed.
func (b *Backend) Tensor(a kernels.Arena, off int64, dt tensor.Dtype, shape ...int) (*tensor.Dense, error) {
	c := newCall(opTensor)
	c.a, c.off, c.dt, c.shape = a, off, dt, shape
	err := b.do(c)
	t := c.tensor
	c.put()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (b *Backend) tensorOf(c *call) (err error) {
	d, err := b.arena(c.a)
	if err != nil {
		return err
	}
	dt, shape, off := c.dt, c.shape, c.off
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64, tensor.Uint8, tensor.Bool:
	default:
		return fmt.Errorf("%w: unsupported dtype %v", ErrBounds, dt)
	}
	n := int64(1)
	for _, s := range shape {
		var ok bool
		if n, ok = kernels.Mul(n, int64(s)); !ok || s <= 0 {
			return fmt.Errorf("%w: shape %v", ErrBounds, shape)
		}
	}
	size := int64(dt.Size())
	if size <= 0 || off%size != 0 || !kernels.Fits(off, n, size, d.size) {
		return fmt.Errorf("%w: %v tensor %v at %d in %d bytes", ErrBounds, dt, shape, off, d.size)
	}
	defer func() {
		if r := recover(); r != nil {
			c.tensor, err = nil, fmt.Errorf("%w: tensor %v %v: %v", ErrBounds, dt, shape, r)
		}
	}()
	c.tensor = tensor.New(tensor.Of(dt), tensor.WithShape(shape...), tensor.FromMemory(uintptr(d.ptr)+uintptr(off), uintptr(n*size)))
	return nil
}
