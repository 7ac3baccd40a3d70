package cpu

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// StackGather writes the stacked frames of a frame-stack gather (see
// kernels.FrameStackGather), the reference loop of
// kernels/stack_gather.cu:
//
//	for y, wins := range {cur, next} { // next only with NextOut
//		for i, w := range wins {
//			t := the absolute step of slot w.Start of row w.Row (from its cursor)
//			real, lost := stackReal(t)      // frames before the episode, a cut, the row's start: zeros
//			for f := range K {              // f = K-1 is step t
//				dst := frame i*K+f of out_y
//				if f < K-real { zero(dst) } else { copy(dst, ring[w.Row, (w.Start-(K-1-f)) mod Capacity]) }
//			}
//			if y == 0 && lost && Mark { valid[i], masked[i] = 0, 0 }
//		}
//	}
//
// Every window must have 0 <= Row < Rows, 0 <= Start < Capacity, and its
// row's cursor be at least 1; nothing is written on error (ErrBounds).
// It is safe for concurrent use by calls writing disjoint outputs.
func (*Backend) StackGather(g kernels.FrameStackGather) error {
	ring, err := host(g.Col.Ring)
	if err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	out, err := host(g.Col.Out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	var next *Arena
	var nextSize int64
	if g.NextOut != nil {
		if next, err = host(g.NextOut); err != nil {
			return fmt.Errorf("next output: %w", err)
		}
		nextSize = next.Size()
	}
	sel, err := host(g.Sel)
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	meta, err := host(g.Meta)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	cu, err := host(g.Cursors)
	if err != nil {
		return fmt.Errorf("cursors: %w", err)
	}
	if bad := g.Bad(ring.Size(), out.Size(), nextSize, sel.Size(), meta.Size(), cu.Size()); bad != "" {
		return fmt.Errorf("%w: frame-stack gather: %s", ErrBounds, bad)
	}
	if g.N == 0 {
		return nil
	}
	if g.Col.Out == g.Col.Ring || (next != nil && g.NextOut == g.Col.Ring) {
		return fmt.Errorf("%w: frame-stack gather writes its ring", ErrBounds)
	}
	cursors := unsafe.Slice((*int64)(unsafe.Pointer(&cu.b[g.CursorsOff])), g.Rows)
	m := meta.b[g.MetaOff : g.MetaOff+g.Rows*g.Capacity]
	type pass struct {
		wins []kernels.WinDesc
		dst  []byte
		off  int64
	}
	// The windows are read in place: Bad keeps the outputs (frames, and
	// the validity bytes and weights of Mark) off them.
	all := [2]pass{{wins: unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sel.b[g.CurOff])), g.N), dst: out.b, off: g.Col.OutOff}}
	passes := all[:1]
	if next != nil {
		all[1] = pass{wins: unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sel.b[g.NextOff])), g.N), dst: next.b, off: g.NextOutOff}
		passes = all[:2]
	}
	for _, p := range passes {
		for i, w := range p.wins {
			if w.Row < 0 || w.Row >= g.Rows || w.Start < 0 || w.Start >= g.Capacity || cursors[w.Row] < 1 {
				return fmt.Errorf("%w: frame-stack gather: window %d %+v of %d rows, capacity %d, or a row's cursor below 1", ErrBounds, i, w, g.Rows, g.Capacity)
			}
		}
	}
	s, stride := g.Col.StepBytes, g.Col.RingStride()
	for y, p := range passes {
		for i, w := range p.wins {
			real, lost := StackReal(m[w.Row*g.Capacity:(w.Row+1)*g.Capacity], cursors[w.Row], g.Capacity, w.Start, g.K)
			for f := range g.K {
				dst := p.dst[p.off+(int64(i)*g.K+f)*s:][:s]
				if f < g.K-real {
					clear(dst)
					continue
				}
				slot := (w.Start - (g.K - 1 - f) + g.Capacity) % g.Capacity
				src := (w.Row*g.Capacity+slot)*stride + g.Col.Offset
				copy(dst, ring.b[src:src+s])
			}
			if y == 0 && lost && g.Mark {
				sel.b[g.ValidOff+int64(i)] = 0
				*(*float32)(unsafe.Pointer(&sel.b[g.MaskedOff+4*int64(i)])) = 0
			}
		}
	}
	return nil
}

// StackReal returns how many of the k frames ending at slot s of a row
// are real (the earlier ones are zeros) and whether the walk back reached
// a step the ring has overwritten: meta is the row's per-step metadata
// bytes (capacity of them, tensorbuf's layout), cursor its write cursor.
// A frame p is not real when a later one of the k (p+1 <= t) is the
// episode's First step, when p is before the row's first step, or when p
// is cut (its successor does not continue it); it is lost when none of
// these holds and p < cursor-capacity. 1 <= k <= capacity.
func StackReal(meta []byte, cursor, capacity, s, k int64) (real int64, lost bool) {
	back := (cursor-1)%capacity - s
	if back < 0 {
		back += capacity
	}
	t := cursor - 1 - back
	oldest := max(cursor-capacity, 0)
	for j := int64(1); j < k; j++ {
		p := t - j
		s1 := (s - j + 1 + capacity) % capacity
		if meta[s1]&3 == 0 || p < 0 {
			return j, false
		}
		if p < oldest {
			return j, true
		}
		if meta[(s1-1+capacity)%capacity]&metaCut != 0 {
			return j, false
		}
	}
	return k, false
}
