package cpu

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// Bits of the per-step metadata byte (tensorbuf's layout, which the
// device mirror copies): step type in bits 0-1, next step type in bits
// 2-3, discount zero, cut.
const (
	metaLast     = 2
	metaDiscZero = 1 << 4
	metaCut      = 1 << 5
)

// NStepCheck computes the n-step length k of each drawn window from the
// metadata and cursor mirrors and writes the windows and per-transition
// values the n-step materialisation reads (see kernels.TransitionCheck):
//
//	for i, w := range wins {
//		at := func(j int64) uint8 { return meta[w.Row*capacity+(w.Start+j)%capacity] }
//		k := int64(0)
//		if m := at(0); m&3 != Last && m&cut == 0 {
//			k = min(horizon, w.Len-1, (cursors[w.Row]-1-w.Start)%capacity)
//			for j := int64(1); j <= k; j++ {
//				if m := at(j-1); m&cut != 0 { k = j-1; break }
//				else if (m>>2)&3 == Last { k = j; break }
//			}
//		}
//		steps[i], cur[i], next[i] = {w.Row, w.Start, k}, {w.Row, w.Start, 1}, {w.Row, (w.Start+k)%capacity, 1}
//		valid[i], disc[i], done[i], masked[i] = k > 0, 0, Running, 0
//		if k > 0 {
//			done[i] = the IsDone of at(k-1)
//			g := 1.0; for range k { g = float64(g*gamma) }
//			if done[i] != Terminated { disc[i] = float32(g) }
//			masked[i] = float32(weights[i])
//		}
//	}
//
// Every window must have 0 <= Row < c.Rows, 0 <= Start < c.Capacity and
// 1 <= Len <= c.Capacity, and every cursor be at least 1; nothing is
// written on error (ErrBounds). It is safe for concurrent use by calls
// writing disjoint outputs.
func (*Backend) NStepCheck(c kernels.TransitionCheck) error {
	meta, err := host(c.Meta)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	cu, err := host(c.Cursors)
	if err != nil {
		return fmt.Errorf("cursors: %w", err)
	}
	sel, err := host(c.Sel)
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	out, err := host(c.Out)
	if err != nil {
		return fmt.Errorf("transitions: %w", err)
	}
	if bad := c.Bad(meta.Size(), cu.Size(), sel.Size(), out.Size()); bad != "" {
		return fmt.Errorf("%w: n-step check: %s", ErrBounds, bad)
	}
	if c.N == 0 {
		return nil
	}
	m := meta.b[c.MetaOff : c.MetaOff+c.Rows*c.Capacity]
	cursors := unsafe.Slice((*int64)(unsafe.Pointer(&cu.b[c.CursorsOff])), c.Rows)
	sb := sel.b
	wins := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[c.WinOff])), c.N)
	weights := unsafe.Slice((*float64)(unsafe.Pointer(&sb[c.WeightOff])), c.N)
	for i, w := range wins {
		if w.Row < 0 || w.Row >= c.Rows || w.Start < 0 || w.Start >= c.Capacity || w.Len < 1 || w.Len > c.Capacity || cursors[w.Row] < 1 {
			return fmt.Errorf("%w: n-step check: window %d %+v of %d rows, capacity %d, or a row's cursor below 1", ErrBounds, i, w, c.Rows, c.Capacity)
		}
	}
	// Read every input before writing: the outputs may not overlap the
	// inputs, but the windows are copied so that a caller's mistake
	// cannot make the loop read what it wrote.
	in := make([]kernels.WinDesc, c.N)
	copy(in, wins)
	ws := make([]float64, c.N)
	copy(ws, weights)
	steps := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[c.StepsOff])), c.N)
	cur := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[c.CurOff])), c.N)
	next := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[c.NextOff])), c.N)
	valid := sb[c.ValidOff : c.ValidOff+c.N]
	masked := unsafe.Slice((*float32)(unsafe.Pointer(&sb[c.MaskedOff])), c.N)
	disc := unsafe.Slice((*float32)(unsafe.Pointer(&out.b[c.DiscOff])), c.N)
	done := out.b[c.DoneOff : c.DoneOff+c.N]
	for i, w := range in {
		row := m[w.Row*c.Capacity : (w.Row+1)*c.Capacity]
		at := func(j int64) uint8 { return row[(w.Start+j)%c.Capacity] }
		k := int64(0)
		if b := at(0); b&3 != metaLast && b&metaCut == 0 {
			k = min(c.Horizon, w.Len-1, (cursors[w.Row]-1-w.Start)%c.Capacity)
			for j := int64(1); j <= k; j++ {
				b := at(j - 1)
				if b&metaCut != 0 {
					k = j - 1
					break
				}
				if (b>>2)&3 == metaLast {
					k = j
					break
				}
			}
		}
		steps[i] = kernels.WinDesc{Row: w.Row, Start: w.Start, Len: k}
		cur[i] = kernels.WinDesc{Row: w.Row, Start: w.Start, Len: 1}
		next[i] = kernels.WinDesc{Row: w.Row, Start: (w.Start + k) % c.Capacity, Len: 1}
		valid[i], disc[i], done[i], masked[i] = 0, 0, 0, 0
		if k == 0 {
			continue
		}
		valid[i] = 1
		if b := at(k - 1); (b>>2)&3 == metaLast {
			done[i] = 2 // Truncated
			if b&metaDiscZero != 0 {
				done[i] = 1 // Terminated
			}
		}
		if done[i] != 1 {
			g := 1.0
			for range k {
				g = float64(g * c.Gamma)
			}
			disc[i] = float32(g)
		}
		masked[i] = float32(ws[i])
	}
	return nil
}

// NStepRewardAt is NStepRewardColumn with the n windows read from backend
// memory: kernels.WinDesc records from byte offset winOff (a multiple of
// 8) of wins, checked as NStepRewardColumn checks its windows (ErrBounds,
// nothing written). It is safe for concurrent use by calls writing
// disjoint outputs.
func (b *Backend) NStepRewardAt(rew kernels.Column, out kernels.Arena, outOff int64, wins kernels.Arena, winOff, n, capacity int64, gamma float64) error {
	w, err := host(wins)
	if err != nil {
		return fmt.Errorf("n-step windows: %w", err)
	}
	if n < 0 || winOff%8 != 0 || !kernels.Fits(winOff, n, kernels.WinDescSize, w.Size()) {
		return fmt.Errorf("%w: %d windows at %d of %d bytes", ErrBounds, n, winOff, w.Size())
	}
	var ws []kernels.Window
	if n > 0 {
		ws = unsafe.Slice((*kernels.Window)(unsafe.Pointer(&w.b[winOff])), n)
	}
	return b.NStepRewardColumn(rew, out, outOff, ws, capacity, gamma)
}
