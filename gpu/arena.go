//go:build trajring_cuda

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
	freed bool // guarded by the owner's mutex
}

// Size returns the arena's length in bytes. It is safe for concurrent use.
func (a *Arena) Size() int64 { return a.size }

// Ptr returns the device address of the arena's first byte (0 for an empty
// arena), for handing the memory to other CUDA code. It is safe for
// concurrent use.
func (a *Arena) Ptr() cu.DevicePtr { return a.ptr }

// arena checks that a is a live arena of this backend; it runs on the
// backend.
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
	err := b.enter()
	if err != nil {
		return nil, err
	}
	defer b.exit()
	a := &Arena{size: n, owner: b}
	if n > 0 {
		p, err := cu.MemAlloc(n)
		if err != nil {
			if errors.Is(err, cu.OutOfMemory) {
				free, total, _ := cu.MemInfo()
				return nil, fmt.Errorf("%w: alloc of %d bytes on %s (%d of %d bytes free)", ErrOutOfMemory, n, drv.devName, free, total)
			}
			return nil, driverErr("cuMemAlloc", err)
		}
		if err := cu.MemsetD8Async(p, 0, n, b.stream); err != nil {
			_ = cu.MemFree(p)
			return nil, driverErr("cuMemsetD8Async", err)
		}
		a.ptr = p
	}
	b.arenas[a] = struct{}{}
	return a, nil
}

// Free waits for work that may use the arena, then releases it. Using it
// afterwards is an error.
func (b *Backend) Free(a kernels.Arena) error {
	if err := b.enterAny(); err != nil { // any goroutine, also during a capture
		return err
	}
	defer b.exit()
	if !b.capturing {
		if err := b.bindNow(); err != nil {
			return err
		}
	}
	return b.free(a)
}

func (b *Backend) free(a kernels.Arena) error {
	d, err := b.arena(a)
	if err != nil {
		return err
	}
	if b.capturing {
		// A graph capture is recording the stream: the arena is gone for
		// every caller now, its memory once the capture ends.
		delete(b.arenas, d)
		d.freed = true
		b.deferred = append(b.deferred, d)
		return nil
	}
	if err := b.syncStream(); err != nil {
		return err
	}
	return b.freeArena(d)
}

// freeDeferred frees the memory of the arenas freed during a capture,
// after the stream's work (see Backend.capturing). The caller has entered
// the backend and no capture is running.
func (b *Backend) freeDeferred() error {
	if len(b.deferred) == 0 {
		return nil
	}
	err := b.syncStream()
	for _, d := range b.deferred {
		if d.ptr != 0 && err == nil {
			p := d.ptr
			d.ptr = 0
			err = driverErr("cuMemFree", cu.MemFree(p))
		}
	}
	b.deferred = b.deferred[:0]
	return err
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

// Upload queues a copy of src into dst at byte offset off on the
// backend's stream, after the work queued there before it and before the
// work queued after it; src may be reused as soon as Upload returns. Up
// to 16 MiB go through pinned staging; larger uploads are copied from
// src itself, which the driver stages before it returns (a synchronous
// copy would run on the legacy stream, which the backend's non-blocking
// stream does not wait for, and may land after the next kernel).
func (b *Backend) Upload(dst kernels.Arena, off int64, src []byte) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.upload(dst, off, src)
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
		if b.capturing {
			return fmt.Errorf("%w: an upload during a graph capture (a replay would read the caller's memory then)", ErrDriver)
		}
		return driverErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(d.ptr+cu.DevicePtr(off), unsafe.Pointer(&src[0]), n, b.stream))
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

// Download copies len(dst) bytes of src from byte offset off into dst on
// the backend's stream, after the work queued so far, and waits for it.
func (b *Backend) Download(dst []byte, src kernels.Arena, off int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.download(dst, src, off)
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
	if n > 0 {
		// Into pageable memory the driver returns once the copy is done;
		// the sync below reports the errors of the work before it.
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), d.ptr+cu.DevicePtr(off), n, b.stream); err != nil {
			return driverErr("cuMemcpyDtoHAsync", err)
		}
		b.countToHost(n)
	}
	return b.syncStream()
}

// Copy queues a device-to-device copy of n bytes from src at byte offset
// srcOff to dst at dstOff on the backend's stream. The ranges must not
// overlap. It is the ceiling the kernels are measured against.
func (b *Backend) Copy(dst kernels.Arena, dstOff int64, src kernels.Arena, srcOff, n int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.copyDtoD(dst, dstOff, src, srcOff, n)
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
// device memory from byte offset off, without copying and without a
// driver call. Its engine is DeviceEngine, so gorgonia.org/tensor refuses
// host operations on it; never call its Data or print it with a value
// verb. Copy it with Download (which waits for the work that writes it)
// or HostInto. It is valid until the arena is freed.
func (b *Backend) Tensor(a kernels.Arena, off int64, dt tensor.Dtype, shape ...int) (*tensor.Dense, error) {
	b.mu.Lock() // no driver call: the arena check needs only the mutex
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	return b.tensorOf(a, off, dt, shape)
}

func (b *Backend) tensorOf(a kernels.Arena, off int64, dt tensor.Dtype, shape []int) (t *tensor.Dense, err error) {
	d, err := b.arena(a)
	if err != nil {
		return nil, err
	}
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64, tensor.Uint64, tensor.Uint8, tensor.Bool:
	default:
		return nil, fmt.Errorf("%w: unsupported dtype %v", ErrBounds, dt)
	}
	n := int64(1)
	for _, s := range shape {
		var ok bool
		if n, ok = kernels.Mul(n, int64(s)); !ok || s <= 0 {
			return nil, fmt.Errorf("%w: shape %v", ErrBounds, shape)
		}
	}
	size := int64(dt.Size())
	if size <= 0 || off%size != 0 || !kernels.Fits(off, n, size, d.size) {
		return nil, fmt.Errorf("%w: %v tensor %v at %d in %d bytes", ErrBounds, dt, shape, off, d.size)
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: tensor %v %v: %v", ErrBounds, dt, shape, r)
		}
	}()
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape...), tensor.WithEngine(DeviceEngine{}),
		tensor.FromMemory(uintptr(d.ptr)+uintptr(off), uintptr(n*size))), nil
}
