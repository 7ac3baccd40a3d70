// Package cpu is trajring's pure-Go backend: host-memory arenas and the
// reference implementation of every data-movement kernel.
//
// Every kernel here is the reference the CUDA kernels in package kernels
// are tested against, so each wrapper's doc comment spells out its loop.
// Calls validate all sizes and indices before touching memory: a call that
// returns an error has written nothing.
package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/trajring/trajring/internal/kernelargs"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// ErrBounds reports an index, offset or size outside an arena.
var ErrBounds = errors.New("cpu: out of bounds")

// ErrArena reports an arena that this backend did not allocate, or one
// already freed.
var ErrArena = errors.New("cpu: foreign or freed arena")

// parallelBytes is the size of a data movement above which the backend
// splits it over goroutines: waking a second goroutine costs tens of
// microseconds, so only large movements gain from it.
const parallelBytes = 2 << 20

// Arena is a block of host memory. Large arenas from Alloc are mapped on
// their own pages with transparent huge pages requested (on Linux), which
// makes random-row gathers 20-25% faster than on the Go heap; arenas from
// AllocOutput always live on the Go heap.
type Arena struct {
	b      []byte
	mapped bool
}

// liveBytes counts the bytes of arenas allocated by every cpu Backend of
// the process and not yet freed.
var liveBytes atomic.Int64

// LiveBytes returns the bytes of host arenas that cpu backends have
// allocated (Alloc, AllocOutput) and not yet freed, summed over every
// Backend of the process. Tests use it to check that results are given
// back. It is safe for concurrent use.
func LiveBytes() int64 { return liveBytes.Load() }

// Size returns the arena's length in bytes.
func (a *Arena) Size() int64 { return int64(len(a.b)) }

// Bytes returns the arena's memory. It is valid until the arena is freed.
func (a *Arena) Bytes() []byte { return a.b }

// Backend is the pure-Go backend. It is safe for concurrent use by
// multiple goroutines as long as concurrent calls write disjoint memory.
type Backend struct {
	workers int
}

// New returns a cpu backend that uses up to GOMAXPROCS goroutines for
// large data movements.
func New() *Backend { return &Backend{workers: runtime.GOMAXPROCS(0)} }

// Name returns "cpu".
func (*Backend) Name() string { return "cpu" }

// Alloc returns a zeroed arena of n bytes.
func (*Backend) Alloc(n int64) (kernels.Arena, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc of %d bytes", ErrBounds, n)
	}
	a, err := alloc(n)
	if err != nil {
		return nil, err
	}
	liveBytes.Add(n)
	return a, nil
}

// AllocOutput returns a zeroed arena of n bytes for results handed to
// users (sampled batches, transitions, exports, host copies). Unlike
// Alloc it always takes Go heap memory, whatever the size: the garbage
// collector then counts it towards its pacing and keeps it alive for as
// long as any slice into it (a tensor's backing, a slice from Data) is
// reachable, so a result that is dropped instead of freed can never leave
// a slice pointing at unmapped memory. Such results are written in order,
// so they gain little from huge pages.
func (*Backend) AllocOutput(n int64) (kernels.Arena, error) {
	if n < 0 || n > math.MaxInt {
		return nil, fmt.Errorf("%w: alloc of %d bytes", ErrBounds, n)
	}
	a := &Arena{b: make([]byte, n)}
	liveBytes.Add(n)
	return a, nil
}

// Free releases an arena. Using it afterwards is an error, and so is a
// second Free.
func (*Backend) Free(a kernels.Arena) error {
	h, err := host(a)
	if err != nil {
		return err
	}
	n := h.Size()
	if err := free(h); err != nil {
		return err
	}
	liveBytes.Add(-n)
	return nil
}

// Upload copies src into dst at byte offset off.
func (*Backend) Upload(dst kernels.Arena, off int64, src []byte) error {
	h, err := host(dst)
	if err != nil {
		return err
	}
	if off < 0 || off+int64(len(src)) > h.Size() {
		return fmt.Errorf("%w: upload of %d bytes at %d into %d", ErrBounds, len(src), off, h.Size())
	}
	copy(h.b[off:], src)
	return nil
}

// Download copies len(dst) bytes of src from byte offset off into dst.
func (*Backend) Download(dst []byte, src kernels.Arena, off int64) error {
	h, err := host(src)
	if err != nil {
		return err
	}
	if off < 0 || off+int64(len(dst)) > h.Size() {
		return fmt.Errorf("%w: download of %d bytes at %d from %d", ErrBounds, len(dst), off, h.Size())
	}
	copy(dst, h.b[off:])
	return nil
}

// Sync waits for outstanding work; the cpu backend is synchronous, so it
// returns at once.
func (*Backend) Sync() error { return nil }

// Close releases the backend's resources; arenas must be freed first.
func (*Backend) Close() error { return nil }

// Scatter writes one batched step into the ring of every column:
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for i, ix := range idx {
//			ring_c[ix*r+o : ix*r+o+s] = src[c][i*s : (i+1)*s]
//		}
//	}
//
// len(src) == len(cols), and len(src[c]) == len(idx)*StepBytes. Columns
// may share a ring arena (packed records, see kernels.Column), each
// writing its own bytes of the record.
func (b *Backend) Scatter(cols []kernels.Column, src [][]byte, idx []int64) error {
	return b.scatter(cols, src, nil, idx)
}

// ScatterFrom is Scatter where the source of column c is the tensor
// dev[c] when it is not nil (then src[c] must be nil): its first
// len(idx)*StepBytes bytes. This backend's memory is host memory, so a
// source is a contiguous host tensor (CheckSource), read in place; the
// gpu backend's ScatterFrom reads device tensors on the device.
// len(dev) == len(cols). Safe for concurrent use as Scatter is.
func (b *Backend) ScatterFrom(cols []kernels.Column, src [][]byte, dev []*tensor.Dense, idx []int64) error {
	if len(dev) != len(cols) {
		return fmt.Errorf("%w: %d tensor sources for %d columns", ErrBounds, len(dev), len(cols))
	}
	return b.scatter(cols, src, dev, idx)
}

// CheckSource reports an error unless t is a contiguous host tensor
// (gorgonia.org/tensor sees its memory as natively accessible) of at
// least n bytes: what ScatterFrom reads for this backend. A device
// tensor is refused with ErrArena. Safe for concurrent use.
func (*Backend) CheckSource(t *tensor.Dense, n int64) error {
	_, err := sourceBytes(t, n)
	return err
}

// sourceBytes returns the first n bytes of a host tensor source.
func sourceBytes(t *tensor.Dense, n int64) ([]byte, error) {
	if t == nil || !t.IsNativelyAccessible() {
		return nil, fmt.Errorf("%w: source is not host memory", ErrArena)
	}
	if t.RequiresIterator() || n < 0 || int64(len(t.Header.Raw)) < n {
		return nil, fmt.Errorf("%w: source of %d contiguous bytes, %d needed", ErrBounds, len(t.Header.Raw), n)
	}
	return t.Header.Raw[:n], nil
}

// scatter runs Scatter (dev nil) and ScatterFrom. It checks every
// column against the largest index (no division per column); on any
// fault, checkScatter finds the first one, column by column.
func (b *Backend) scatter(cols []kernels.Column, src [][]byte, dev []*tensor.Dense, idx []int64) error {
	if len(src) != len(cols) {
		return fmt.Errorf("%w: %d sources for %d columns", ErrBounds, len(src), len(cols))
	}
	n := int64(len(idx))
	var top uint64 // the largest index, a negative one as a huge one
	for _, ix := range idx {
		top = max(top, uint64(ix))
	}
	for c := range cols {
		col := &cols[c]
		ring, ok := col.Ring.(*Arena)
		if !ok || ring == nil || ring.b == nil || !ringHolds(col, int64(len(ring.b)), top, n) {
			return checkScatter(cols, src, dev, idx)
		}
		if dev != nil && dev[c] != nil {
			if _, err := sourceBytes(dev[c], n*col.StepBytes); src[c] != nil || err != nil {
				return checkScatter(cols, src, dev, idx)
			}
		} else if int64(len(src[c])) != n*col.StepBytes {
			return checkScatter(cols, src, dev, idx)
		}
	}
	for c := range cols {
		col := &cols[c]
		sc := src[c]
		if dev != nil && dev[c] != nil {
			sc = dev[c].Header.Raw[:n*col.StepBytes] // checked above
		}
		scatterColumn(col.Ring.(*Arena).b[col.Offset:], sc, idx, col.StepBytes, col.RingStride())
	}
	return nil
}

// ringHolds reports whether the column's layout is valid (see
// kernels.Column.RingSteps) and, when n > 0, ring step top lies within an
// arena of size bytes: (top+1)*stride <= size, without overflow.
func ringHolds(col *kernels.Column, size int64, top uint64, n int64) bool {
	st := col.RingStride()
	if col.StepBytes <= 0 || col.Offset < 0 || col.Offset > st-col.StepBytes || size < 0 {
		return false
	}
	if n == 0 {
		return true
	}
	hi, lo := bits.Mul64(top+1, uint64(st))
	return top < math.MaxInt64 && hi == 0 && lo <= uint64(size)
}

// scatterColumn moves step i of src (s bytes each) to ring step idx[i],
// r bytes apart in ring (from the column's offset); steps of 4 aligned
// bytes (the built-in columns) move as one typed store instead of a copy
// call. Large steps of several rows going to a ring larger than the
// last-level cache move with non-temporal stores (ntScatter), which need
// not read the lines they overwrite. The caller has checked every index.
func scatterColumn(ring, src []byte, idx []int64, s, r int64) {
	if s == 4 && r%4 == 0 && aligned4(ring) && aligned4(src) {
		for i, ix := range idx {
			o := ix * r
			_ = ring[o+3]
			_ = src[4*i+3]
			*(*uint32)(unsafe.Pointer(&ring[o])) = *(*uint32)(unsafe.Pointer(&src[4*i]))
		}
		return
	}
	if ntScatter(ring, s, r, len(idx)) {
		for i, ix := range idx {
			_ = ring[ix*r+s-1]
			_ = src[int64(i)*s+s-1]
			ntCopy(unsafe.Pointer(&ring[ix*r]), unsafe.Pointer(&src[int64(i)*s]), s)
		}
		sfence() // before any later store, such as the unlock that publishes the steps
		return
	}
	for i, ix := range idx {
		copy(ring[ix*r:ix*r+s], src[int64(i)*s:])
	}
}

// Non-temporal scatters: steps of at least ntMinStep bytes (a multiple of
// 64, 32-byte aligned in the ring), at least ntMinRows of them in one
// call, into a ring of at least ntMinRing bytes. Such steps are not read
// again before the cache has evicted them, and a store that need not
// first read its line halves the memory traffic; a single row's steps
// written call after call form one stream that the hardware prefetcher
// already follows, where the fence after non-temporal stores costs more
// than it saves.
const (
	ntMinStep = 256
	ntMinRows = 4
)

// ntMinRing is the smallest ring written with non-temporal stores, bytes
// from the column's offset: twice a 32 MiB last-level cache (a variable
// for tests).
var ntMinRing int64 = 64 << 20

// scatterNT switches non-temporal scatters where the CPU has them (tests
// and benchmarks switch it through internal/impl as "cpu"/"scatter-nt").
var scatterNT bool

// ntScatter reports whether scatterColumn moves n steps of s bytes, r
// apart in ring, with non-temporal stores.
func ntScatter(ring []byte, s, r int64, n int) bool {
	return scatterNT && n >= ntMinRows && s >= ntMinStep && s%64 == 0 && r%32 == 0 &&
		int64(len(ring)) >= ntMinRing && uintptr(unsafe.Pointer(unsafe.SliceData(ring)))%32 == 0
}

// aligned4 reports whether b starts at a multiple of 4 bytes.
func aligned4(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 }

// checkScatter returns the first fault of a scatter's columns, sources
// and indices, column by column.
func checkScatter(cols []kernels.Column, src [][]byte, dev []*tensor.Dense, idx []int64) error {
	n := int64(len(idx))
	for c := range cols {
		ring, err := host(cols[c].Ring)
		if err != nil {
			return err
		}
		s := cols[c].StepBytes
		steps, ok := cols[c].RingSteps(ring.Size())
		if dev != nil && dev[c] != nil {
			if src[c] != nil {
				return fmt.Errorf("%w: column %d has a byte and a tensor source", ErrBounds, c)
			}
			if _, err := sourceBytes(dev[c], n*s); err != nil {
				return fmt.Errorf("column %d source: %w", c, err)
			}
		} else if int64(len(src[c])) != n*s {
			ok = false
		}
		if !ok {
			return fmt.Errorf("%w: column %d: %d source bytes for %d steps of %d (stride %d, offset %d)", ErrBounds, c, len(src[c]), len(idx), s, cols[c].Stride, cols[c].Offset)
		}
		if err := check.Index(idx, steps); err != nil {
			return fmt.Errorf("column %d: %w", c, err)
		}
	}
	return fmt.Errorf("%w: scatter fault not found", ErrBounds) // not reached: scatter found one
}

// GatherRows reads the steps idx of every column into its output:
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for i, ix := range idx {
//			out_c[OutOff+i*s : OutOff+(i+1)*s] = ring_c[ix*r+o : ix*r+o+s]
//		}
//	}
func (b *Backend) GatherRows(cols []kernels.Column, idx []int64) error {
	total, err := check.Gather(cols, idx, int64(len(idx)), false, nil, nil, nil)
	if err != nil {
		return err
	}
	if total < parallelBytes || b.workers < 2 {
		gatherRows(cols, idx, 0, len(idx))
		return nil
	}
	j := newJob(jobRows)
	j.cols, j.idx = cols, idx
	b.split(j, len(idx))
	return nil
}

// Concat builds transitions: every column gets the steps idx, and columns
// with a NextOut also get the steps next (their successors), each into a
// dense output run:
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for i := range idx {
//			out_c[OutOff+i*s : OutOff+(i+1)*s] = ring_c[idx[i]*r+o : idx[i]*r+o+s]
//			if NextOut != nil {
//				next_c[NextOff+i*s : NextOff+(i+1)*s] = ring_c[next[i]*r+o : next[i]*r+o+s]
//			}
//		}
//	}
//
// len(next) == len(idx).
func (b *Backend) Concat(cols []kernels.Column, idx, next []int64) error {
	if len(next) != len(idx) {
		return fmt.Errorf("%w: %d successors for %d steps", ErrBounds, len(next), len(idx))
	}
	total, err := check.Gather(cols, idx, int64(len(idx)), true, nil, nil, nil)
	if err != nil {
		return err
	}
	nc := check.Indices(next)
	for c := range cols {
		if cols[c].NextOut != nil {
			steps, _ := cols[c].RingSteps(cols[c].Ring.Size()) // checked by Gather
			if err := nc.Check(steps); err != nil {
				return fmt.Errorf("column %d successors: %w", c, err)
			}
			total += int64(len(next)) * cols[c].StepBytes
		}
	}
	if total < parallelBytes || b.workers < 2 {
		concat(cols, idx, next, 0, len(idx))
		return nil
	}
	j := newJob(jobConcat)
	j.cols, j.idx, j.next = cols, idx, next
	b.split(j, len(idx))
	return nil
}

// GatherWindows reads sequences of seqLen steps, padding each window after
// its Len real steps and writing a mask that is 1 on real steps and 0 on
// pad steps:
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for b, w := range wins {
//			for t := int64(0); t < seqLen; t++ {
//				j := int64(b)*seqLen + t
//				if t < w.Len {
//					ix := w.Row*capacity + (w.Start+t)%capacity
//					out_c[OutOff+j*s : OutOff+(j+1)*s] = ring_c[ix*r+o : ix*r+o+s]
//				} else {
//					out_c[OutOff+j*s : OutOff+(j+1)*s] = Pad (zeros if nil)
//				}
//			}
//		}
//	}
//	mask[maskOff+b*seqLen+t] = t < wins[b].Len
//
// The mask is skipped when mask is nil.
func (b *Backend) GatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	n, rows, total, err := check.Windows(cols, wins, seqLen, capacity, nil, nil)
	if err != nil {
		return err
	}
	if err := check.Window(wins, rows, seqLen, capacity); err != nil {
		return err
	}
	if _, err := check.Mask(mask, maskOff, n); err != nil {
		return err
	}
	if total < parallelBytes || b.workers < 2 {
		gatherWindows(cols, wins, seqLen, capacity, mask, maskOff, 0, len(wins))
		return nil
	}
	j := newJob(jobWindows)
	j.cols, j.wins, j.seqLen, j.capacity, j.mask, j.maskOff = cols, wins, seqLen, capacity, mask, maskOff
	b.split(j, len(wins))
	return nil
}

// Tensor returns a tensor of the given dtype and shape viewing the arena's
// memory from byte offset off. The tensor shares memory with the arena and
// is valid until the arena is freed.
func (*Backend) Tensor(a kernels.Arena, off int64, dt tensor.Dtype, shape ...int) (*tensor.Dense, error) {
	h, err := host(a)
	if err != nil {
		return nil, err
	}
	n := int64(1)
	for _, d := range shape {
		var ok bool
		if n, ok = kernels.Mul(n, int64(d)); !ok || d <= 0 {
			return nil, fmt.Errorf("%w: shape %v", ErrBounds, shape)
		}
	}
	size := int64(dt.Size())
	if size <= 0 || off%size != 0 || !kernels.Fits(off, n, size, h.Size()) {
		return nil, fmt.Errorf("%w: %v tensor %v at %d in %d bytes", ErrBounds, dt, shape, off, h.Size())
	}
	p := unsafe.Pointer(&h.b[off])
	var backing any
	switch dt {
	case tensor.Float32:
		backing = unsafe.Slice((*float32)(p), n)
	case tensor.Float64:
		backing = unsafe.Slice((*float64)(p), n)
	case tensor.Int32:
		backing = unsafe.Slice((*int32)(p), n)
	case tensor.Int64:
		backing = unsafe.Slice((*int64)(p), n)
	case tensor.Uint64:
		backing = unsafe.Slice((*uint64)(p), n)
	case tensor.Uint8:
		backing = unsafe.Slice((*uint8)(p), n)
	case tensor.Bool:
		backing = unsafe.Slice((*bool)(p), n)
	default:
		return nil, fmt.Errorf("%w: unsupported dtype %v", ErrBounds, dt)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

func host(a kernels.Arena) (*Arena, error) {
	h, ok := a.(*Arena)
	if !ok || h == nil || h.b == nil {
		return nil, ErrArena
	}
	return h, nil
}

// check runs the argument checks the gpu backend runs too
// (internal/kernelargs), with this backend's ErrBounds and arenas.
var check = kernelargs.Checker[*Arena, hostArenas]{Bounds: ErrBounds}

// hostArenas resolves this backend's arenas for check.
type hostArenas struct{}

// Arena returns the arena behind a and its size, or ErrArena.
func (hostArenas) Arena(a kernels.Arena) (*Arena, int64, error) {
	h, err := host(a)
	if err != nil {
		return nil, 0, err
	}
	return h, h.Size(), nil
}
