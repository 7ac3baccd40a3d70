//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
)

// NStepCheck computes the n-step length k of each window a draw kernel
// wrote, from a table's mirrors of the per-step metadata and the rows'
// cursors, and writes the n-step, current-step and next-step windows,
// validity, masked float32 weights, discounts and IsDone values, in one
// launch (kernels/nstep_check.cu; kernels.TransitionCheck describes the
// layout). Reference loop (cpu.Backend.NStepCheck):
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
// Every argument travels as a kernel parameter: nothing is copied to the
// device and nothing waits. The arguments are checked (ErrBounds, nothing
// queued) but the windows are not (they are in device memory): each must
// be as the draw kernels write them from a table's items (0 <= Row < Rows,
// 0 <= Start < Capacity, 1 <= Len <= Capacity) over cursors of stored
// steps. It is safe for concurrent use.
func (b *Backend) NStepCheck(c kernels.TransitionCheck) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	meta, err := b.arena(c.Meta)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	cu, err := b.arena(c.Cursors)
	if err != nil {
		return fmt.Errorf("cursors: %w", err)
	}
	sel, err := b.arena(c.Sel)
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	out, err := b.arena(c.Out)
	if err != nil {
		return fmt.Errorf("transitions: %w", err)
	}
	if bad := c.Bad(meta.size, cu.size, sel.size, out.size); bad != "" {
		return fmt.Errorf("%w: n-step check: %s", ErrBounds, bad)
	}
	if c.N == 0 {
		return nil
	}
	s, o := uint64(sel.ptr), uint64(out.ptr)
	return b.launchGrid(kernels.NStepCheck, c.N, 1, 1,
		uint64(meta.ptr)+uint64(c.MetaOff), uint64(cu.ptr)+uint64(c.CursorsOff), uint64(c.Capacity), uint64(c.Horizon),
		math.Float64bits(c.Gamma), uint64(c.N), s+uint64(c.WinOff), s+uint64(c.WeightOff), s+uint64(c.StepsOff),
		s+uint64(c.CurOff), s+uint64(c.NextOff), s+uint64(c.ValidOff), s+uint64(c.MaskedOff), o+uint64(c.DiscOff), o+uint64(c.DoneOff))
}

// NStepRewardAt is NStepRewardColumn with the n windows read from device
// memory (kernels.WinDesc records, Start the slot, as NStepCheck writes
// them) from byte offset winOff of wins, a multiple of 8: one launch,
// nothing copied to the device, nothing waited for. The ring, output and
// gamma are checked as NStepRewardColumn checks them (ErrBounds, nothing
// queued); the windows cannot be (they are in device memory): each must
// have 0 <= Row < the ring's rows, 0 <= Start < capacity and 0 <= Len <=
// capacity. It is safe for concurrent use.
func (b *Backend) NStepRewardAt(rew kernels.Column, out kernels.Arena, outOff int64, wins kernels.Arena, winOff, n, capacity int64, gamma float64) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	r, o, stride, _, err := b.rewardArenas(rew, out, capacity, gamma)
	if err != nil {
		return err
	}
	w, err := b.arena(wins)
	if err != nil {
		return fmt.Errorf("n-step windows: %w", err)
	}
	if n < 0 || winOff%8 != 0 || !kernels.Fits(winOff, n, kernels.WinDescSize, w.size) || outOff%4 != 0 || !kernels.Fits(outOff, n, 4, o.size) {
		return fmt.Errorf("%w: %d windows at %d of %d bytes, sums at %d of %d bytes", ErrBounds, n, winOff, w.size, outOff, o.size)
	}
	if n == 0 {
		return nil
	}
	return b.launchGrid(kernels.NStepReward, n, 1, 1, ringAddr(r, &rew), uint64(o.ptr)+uint64(outOff), uint64(w.ptr)+uint64(winOff),
		uint64(n), uint64(capacity), math.Float64bits(gamma), uint64(stride))
}
