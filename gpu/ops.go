//go:build trajring_cuda

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/internal/kernelargs"
	"github.com/trajring/trajring/internal/scratch"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// Scatter writes one batched step into the ring of every column, all
// columns in one kernel launch (kernels/scatter.cu):
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for i, ix := range idx {
//			ring_c[ix*r+o : ix*r+o+s] = src[c][i*s : (i+1)*s]
//		}
//	}
//
// len(src) == len(cols), and len(src[c]) == len(idx)*StepBytes. The
// sources are copied to pinned staging, which one asynchronous copy moves
// to the device together with the descriptors and indices; src may be
// reused as soon as Scatter returns. When an index repeats, the last
// source step written to it wins, as in the loop above.
func (b *Backend) Scatter(cols []kernels.Column, src [][]byte, idx []int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.scatter(cols, src, nil, idx)
}

// ScatterFrom is Scatter where the source of column c is the device
// tensor dev[c] when it is not nil (then src[c] must be nil): the kernel
// reads its first len(idx)*StepBytes bytes on the device, so nothing of
// it is staged or touched on the host. Each device source must lie within
// one live arena of this backend (CheckSource) other than the rings the
// launch writes; len(dev) == len(cols). The launch is queued on the
// backend's stream after the work queued before it, so it reads what that
// work wrote; work on another stream that writes a source must be made to
// come first (WaitHandle on its event), and must not overwrite a source
// before the launch has run (Record an event after ScatterFrom and wait
// on it there). Host sources (src) are staged as in Scatter.
func (b *Backend) ScatterFrom(cols []kernels.Column, src [][]byte, dev []*tensor.Dense, idx []int64) error {
	if len(dev) != len(cols) {
		return fmt.Errorf("%w: %d device sources for %d columns", ErrBounds, len(dev), len(cols))
	}
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.scatter(cols, src, dev, idx)
}

// scatter runs Scatter (dev nil) and ScatterFrom with the backend entered.
func (b *Backend) scatter(cols []kernels.Column, src [][]byte, dev []*tensor.Dense, idx []int64) error {
	if len(src) != len(cols) {
		return fmt.Errorf("%w: %d sources for %d columns", ErrBounds, len(src), len(cols))
	}
	rings := scratch.Zeroed(&b.rings, len(cols))
	addr := scratch.Zeroed(&b.src.addr, len(cols))
	n := int64(len(idx))
	ic := b.check().Indices(idx)
	for c := range cols {
		ring, err := b.arena(cols[c].Ring)
		if err != nil {
			return fmt.Errorf("column %d ring: %w", c, err)
		}
		rings[c] = ring
	}
	for c := range cols {
		s := cols[c].StepBytes
		steps, ok := cols[c].RingSteps(rings[c].size)
		if !ok {
			return fmt.Errorf("%w: column %d: step of %d bytes at offset %d of a stride of %d", ErrBounds, c, s, cols[c].Offset, cols[c].Stride)
		}
		if dev != nil && dev[c] != nil {
			if src[c] != nil {
				return fmt.Errorf("%w: column %d has a host and a device source", ErrBounds, c)
			}
			a, p, err := b.source(dev[c], n*s)
			if err != nil {
				return fmt.Errorf("column %d source: %w", c, err)
			}
			for _, ring := range rings {
				if a == ring {
					return fmt.Errorf("%w: column %d: source in a ring arena the scatter writes", ErrBounds, c)
				}
			}
			addr[c] = p
		} else if int64(len(src[c])) != n*s {
			return fmt.Errorf("%w: column %d: %d source bytes for %d steps of %d (stride %d, offset %d)", ErrBounds, c, len(src[c]), n, s, cols[c].Stride, cols[c].Offset)
		}
		if err := ic.Check(steps); err != nil {
			return fmt.Errorf("column %d: %w", c, err)
		}
	}
	if n == 0 || len(cols) == 0 {
		return nil
	}
	// The parameter block: descriptors, indices and the host sources
	// staged by a copy; then room on the device for the sources in
	// AllocSource memory, which DMA copies fill without a host copy.
	var l layout
	descOff := l.add(int64(len(cols)) * kernels.ColDescSize)
	idxOff := l.add(n * 8)
	srcOff := scratch.Zeroed(&b.offs, len(cols))
	dma := scratch.Zeroed(&b.dma, len(cols))
	for c := range cols {
		if addr[c] == 0 {
			if _, dma[c] = b.pinnedIn(unsafe.Pointer(unsafe.SliceData(src[c])), int64(len(src[c]))); !dma[c] {
				srcOff[c] = l.add(n * cols[c].StepBytes)
			}
		}
	}
	staged := l.n
	for c := range cols {
		if dma[c] {
			srcOff[c] = l.add(n * cols[c].StepBytes)
		}
	}
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(staged)
	descs := descSlice(buf, descOff, len(cols))
	for c := range cols {
		aux := addr[c]
		if aux == 0 {
			aux = uint64(st.dev) + uint64(srcOff[c])
			if !dma[c] {
				copy(buf[srcOff[c]:], src[c])
			} else if err := cu.MemcpyHtoDAsync(st.dev+cu.DevicePtr(srcOff[c]), unsafe.Pointer(unsafe.SliceData(src[c])), int64(len(src[c])), b.stream); err != nil {
				return driverErr("cuMemcpyHtoDAsync (AllocSource source)", err)
			}
		}
		descs[c] = kernels.ColDesc{Ring: ringAddr(rings[c], &cols[c]), Aux: aux, Step: cols[c].StepBytes, Stride: cols[c].RingStride()}
	}
	lastWins(int64Slice(buf, idxOff, n), idx)
	return b.launch(kernels.Scatter, st, staged, n, maxWords(descs), int64(len(cols)),
		uint64(st.dev)+uint64(descOff), uint64(len(cols)), uint64(st.dev)+uint64(idxOff), uint64(n))
}

// GatherRows reads the steps idx of every column into its output, all
// columns in one kernel launch (kernels/gather_rows.cu):
//
//	for c := range cols {
//		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
//		for i, ix := range idx {
//			out_c[OutOff+i*s : OutOff+(i+1)*s] = ring_c[ix*r+o : ix*r+o+s]
//		}
//	}
func (b *Backend) GatherRows(cols []kernels.Column, idx []int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.gatherRows(cols, idx)
}

func (b *Backend) gatherRows(cols []kernels.Column, idx []int64) error {
	rings, outs, _, err := b.checkGather(cols, idx, int64(len(idx)), false)
	if err != nil {
		return err
	}
	n := int64(len(idx))
	if n == 0 || len(cols) == 0 {
		return nil
	}
	var l layout
	descOff := l.add(int64(len(cols)) * kernels.ColDescSize)
	idxOff := l.add(n * 8)
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(l.n)
	descs := descSlice(buf, descOff, len(cols))
	for c := range cols {
		descs[c] = kernels.ColDesc{
			Ring:   ringAddr(rings[c], &cols[c]),
			Out:    uint64(outs[c].ptr) + uint64(cols[c].OutOff),
			Step:   cols[c].StepBytes,
			Stride: cols[c].RingStride(),
		}
	}
	copy(int64Slice(buf, idxOff, n), idx)
	return b.launch(kernels.GatherRows, st, l.n, n, maxWords(descs), int64(len(cols)),
		uint64(st.dev)+uint64(descOff), uint64(len(cols)), uint64(st.dev)+uint64(idxOff), uint64(n))
}

// Concat builds transitions in one kernel launch (kernels/concat.cu):
// every column gets the steps idx, and columns with a NextOut also get the
// steps next (their successors), each into a dense output run:
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
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.concat(cols, idx, next)
}

func (b *Backend) concat(cols []kernels.Column, idx, next []int64) error {
	if len(next) != len(idx) {
		return fmt.Errorf("%w: %d successors for %d steps", ErrBounds, len(next), len(idx))
	}
	rings, outs, nexts, err := b.checkGather(cols, idx, int64(len(idx)), true)
	if err != nil {
		return err
	}
	nc := b.check().Indices(next)
	for c := range cols {
		if nexts[c] != nil {
			steps, _ := cols[c].RingSteps(rings[c].size) // checked by checkGather
			if err := nc.Check(steps); err != nil {
				return fmt.Errorf("column %d successors: %w", c, err)
			}
		}
	}
	n := int64(len(idx))
	if n == 0 || len(cols) == 0 {
		return nil
	}
	var l layout
	descOff := l.add(int64(len(cols)) * kernels.ColDescSize)
	idxOff := l.add(n * 8)
	nextOff := l.add(n * 8)
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(l.n)
	descs := descSlice(buf, descOff, len(cols))
	for c := range cols {
		d := kernels.ColDesc{
			Ring:   ringAddr(rings[c], &cols[c]),
			Out:    uint64(outs[c].ptr) + uint64(cols[c].OutOff),
			Step:   cols[c].StepBytes,
			Stride: cols[c].RingStride(),
		}
		if nexts[c] != nil {
			d.Next = uint64(nexts[c].ptr) + uint64(cols[c].NextOff)
		}
		descs[c] = d
	}
	copy(int64Slice(buf, idxOff, n), idx)
	copy(int64Slice(buf, nextOff, n), next)
	return b.launch(kernels.Concat, st, l.n, n, maxWords(descs), int64(len(cols)),
		uint64(st.dev)+uint64(descOff), uint64(len(cols)), uint64(st.dev)+uint64(idxOff),
		uint64(st.dev)+uint64(nextOff), uint64(n))
}

// GatherWindows reads sequences of seqLen steps in one kernel launch
// (kernels/window_gather.cu), padding each window after its Len real steps
// and writing a mask that is 1 on real steps and 0 on pad steps:
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
// The mask is skipped when mask is nil. Pad steps and mask are written by
// the kernel; nothing is stored for them in the ring.
func (b *Backend) GatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.gatherWindows(cols, wins, seqLen, capacity, mask, maskOff)
}

func (b *Backend) gatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	k := b.check()
	rings, outs := scratch.Zeroed(&b.rings, len(cols)), scratch.Zeroed(&b.outs, len(cols))
	n, rows, _, err := k.Windows(cols, wins, seqLen, capacity, rings, outs)
	if err != nil {
		return err
	}
	if err := k.Window(wins, rows, seqLen, capacity); err != nil {
		return err
	}
	maskPtr, err := b.maskAddr(mask, maskOff, n)
	if err != nil {
		return err
	}
	if n == 0 || (len(cols) == 0 && maskPtr == 0) {
		return nil
	}
	var l layout
	descOff, padOff := b.windowDescLayout(&l, cols)
	winOff := l.add(int64(len(wins)) * kernels.WinDescSize)
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(l.n)
	descs := putWindowDescs(buf, uint64(st.dev), descOff, padOff, cols, rings, outs)
	wd := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&buf[winOff])), len(wins))
	for i, w := range wins {
		wd[i] = kernels.WinDesc{Row: w.Row, Start: w.Start % capacity, Len: w.Len}
	}
	gy := int64(len(cols))
	if maskPtr != 0 {
		gy++
	}
	return b.launch(kernels.GatherWindows, st, l.n, n, maxWords(descs), gy,
		uint64(st.dev)+uint64(descOff), uint64(len(cols)), uint64(st.dev)+uint64(winOff), uint64(len(wins)),
		uint64(seqLen), uint64(capacity), maskPtr)
}

// windowDescLayout places, in l, the column descriptors of a window
// gather and each column's pad step; the pads' offsets are in b.padOffs.
func (b *Backend) windowDescLayout(l *layout, cols []kernels.Column) (descOff int64, padOff []int64) {
	descOff = l.add(max(int64(len(cols)), 1) * kernels.ColDescSize)
	padOff = scratch.Zeroed(&b.padOffs, len(cols))
	for c := range cols {
		if cols[c].Pad != nil {
			padOff[c] = l.add(cols[c].StepBytes)
		}
	}
	return descOff, padOff
}

// putWindowDescs writes, into buf (whose device address will be dev),
// the descriptors of a window gather's columns at descOff and their pad
// steps at padOff (windowDescLayout), and returns the descriptors.
func putWindowDescs(buf []byte, dev uint64, descOff int64, padOff []int64, cols []kernels.Column, rings, outs []*Arena) []kernels.ColDesc {
	descs := descSlice(buf, descOff, len(cols))
	for c := range cols {
		d := kernels.ColDesc{
			Ring:   ringAddr(rings[c], &cols[c]),
			Out:    uint64(outs[c].ptr) + uint64(cols[c].OutOff),
			Step:   cols[c].StepBytes,
			Stride: cols[c].RingStride(),
		}
		if cols[c].Pad != nil {
			copy(buf[padOff[c]:], cols[c].Pad)
			d.Aux = dev + uint64(padOff[c])
		}
		descs[c] = d
	}
	return descs
}

// windowCols resolves and checks the columns of a window gather of n
// output steps (GatherWindowsAt; kernelargs.Checker.WindowCols): it
// returns the rings, the outputs (scratch of b) and the rows the
// smallest ring holds. It runs with the backend entered.
func (b *Backend) windowCols(cols []kernels.Column, n, capacity int64) (rings, outs []*Arena, rows int64, err error) {
	rings, outs = scratch.Zeroed(&b.rings, len(cols)), scratch.Zeroed(&b.outs, len(cols))
	if rows, _, err = b.check().WindowCols(cols, n, capacity, rings, outs); err != nil {
		return nil, nil, 0, err
	}
	return rings, outs, rows, nil
}

// maskAddr returns the device address of a mask of n bytes at byte off of
// mask, or 0 without a mask. It runs with the backend entered.
func (b *Backend) maskAddr(mask kernels.Arena, off, n int64) (uint64, error) {
	m, err := b.check().Mask(mask, off, n)
	if err != nil || m == nil {
		return 0, err
	}
	return uint64(m.ptr) + uint64(off), nil
}

// launch copies the parameter block staged in st to the device, launches
// kernel k over n steps of up to words words in gy columns, and marks st
// busy until the kernel ends. Every argument is 8 bytes wide, as
// cu.Function.Launch copies exactly 8 bytes per argument. It runs with the
// backend entered.
func (b *Backend) launch(k kernels.Kernel, st *slot, size, n, words, gy int64, args ...uint64) error {
	if err := cu.MemcpyHtoDAsync(st.dev, st.host, size, b.stream); err != nil {
		return driverErr("cuMemcpyHtoDAsync", err)
	}
	err := b.launchGrid(k, n, words, gy, args...)
	if rerr := st.record(b.stream); err == nil && rerr != nil {
		err = driverErr("cuLaunchKernel("+k.Entry+")", rerr)
	}
	return err
}

// launchGrid launches kernel k over n steps of up to words words in gy
// columns, as launch does, with arguments that all travel as kernel
// parameters (no staging slot). It runs with the backend entered
// (enter or enterLaunch).
func (b *Backend) launchGrid(k kernels.Kernel, n, words, gy int64, args ...uint64) error {
	if len(args) != k.Args || len(args) > maxKernelArgs {
		return fmt.Errorf("%w: %s takes %d arguments, got %d", ErrDriver, k.Entry, k.Args, len(args))
	}
	if k.ID < 0 || k.ID >= len(drv.fns) || kernels.All[k.ID].Entry != k.Entry {
		return fmt.Errorf("%w: %s is not one of kernels.All", ErrDriver, k.Entry)
	}
	lanes := kernels.Lanes(max(1, words))
	gx := min(max((n*lanes+blockSize-1)/blockSize, 1), int64(b.blocks))
	copy(b.args[:], args)
	if err := launchKernel(drv.fns[k.ID], int(gx), int(min(gy, 65535)), blockSize, b.stream, b.args, len(args), b.bound); err != nil {
		return driverErr("cuLaunchKernel("+k.Entry+")", err)
	}
	b.launches.Add(1)
	return nil
}

// checkGather validates the columns of a gather of n output steps (and of
// their successor outputs when next is set; kernelargs.Checker.Gather)
// and returns their arenas. It runs on the backend.
func (b *Backend) checkGather(cols []kernels.Column, idx []int64, n int64, next bool) (rings, outs, nexts []*Arena, err error) {
	rings = scratch.Zeroed(&b.rings, len(cols))
	outs = scratch.Zeroed(&b.outs, len(cols))
	nexts = scratch.Zeroed(&b.nexts, len(cols))
	if _, err := b.check().Gather(cols, idx, n, next, rings, outs, nexts); err != nil {
		return nil, nil, nil, err
	}
	return rings, outs, nexts, nil
}

// check returns the argument checks the cpu backend runs too
// (internal/kernelargs), with this backend's ErrBounds and arenas.
func (b *Backend) check() kernelargs.Checker[*Arena, devArenas] {
	return kernelargs.Checker[*Arena, devArenas]{Bounds: ErrBounds, Arenas: devArenas{b}}
}

// devArenas resolves the backend's arenas for check.
type devArenas struct{ b *Backend }

// Arena returns the live arena of this backend behind a and its size,
// or ErrArena.
func (r devArenas) Arena(a kernels.Arena) (*Arena, int64, error) {
	d, err := r.b.arena(a)
	if err != nil {
		return nil, 0, err
	}
	return d, d.size, nil
}

// maxWords returns the largest number of words per step the kernels move
// for these columns: like tr_width in kernels/host/kernels.h, a column
// moves the widest of 16, 8, 4, 2 or 1 bytes that divides its step size and
// every address it touches.
func maxWords(descs []kernels.ColDesc) int64 {
	words := int64(1)
	for _, d := range descs {
		m := d.Ring | d.Out | d.Next | d.Aux | uint64(d.Step) | uint64(d.Stride)
		w := int64(16)
		for w > 1 && m%uint64(w) != 0 {
			w /= 2
		}
		words = max(words, d.Step/w)
	}
	return words
}

// ringAddr returns the device address of column col's bytes of ring step
// 0: the ring's base plus the column's offset into a packed record
// (kernels.ColDesc.Ring).
func ringAddr(ring *Arena, col *kernels.Column) uint64 { return uint64(ring.ptr) + uint64(col.Offset) }

// lastWins copies idx to dst, replacing every index that occurs again later
// by -1 (which the scatter kernel skips), so that the last write to a step
// wins whatever order the device runs its threads in. Indices that only
// grow (the usual add of one step per row) are copied as they are.
func lastWins(dst, idx []int64) {
	copy(dst, idx)
	for i := 1; i < len(idx); i++ {
		if idx[i] <= idx[i-1] {
			seen := make(map[int64]struct{}, len(idx))
			for j := len(idx) - 1; j >= 0; j-- {
				if _, ok := seen[idx[j]]; ok {
					dst[j] = -1
				} else {
					seen[idx[j]] = struct{}{}
				}
			}
			return
		}
	}
}

func descSlice(buf []byte, off int64, n int) []kernels.ColDesc {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*kernels.ColDesc)(unsafe.Pointer(&buf[off])), n)
}

func int64Slice(buf []byte, off, n int64) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(&buf[off])), n)
}
