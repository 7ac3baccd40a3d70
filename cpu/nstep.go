package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// NStepReward writes the discounted sum of up to n float32 rewards per
// window of a ring shaped [rows, capacity] (the reward column of a
// buffer), for n-step transitions. Sums are accumulated in float64 in step
// order, each product and sum rounded to float64 (no fused multiply-add),
// and rounded once to float32 at the end:
//
//	for i, w := range wins {
//		s, g := 0.0, 1.0
//		for j := int64(0); j < w.Len; j++ {
//			ix := w.Row*capacity + (w.Start+j)%capacity
//			s = float64(s + float64(g*float64(ring[ix])))
//			g = float64(g * gamma)
//		}
//		out[outOff/4+i] = float32(s)
//	}
//
// ring and out are float32 arenas; outOff is a byte offset, a multiple of
// 4. Every window needs 0 <= Row < rows, Start >= 0 and 0 <= Len <=
// capacity; gamma must lie in [0, 1]. Nothing is written on error. It is
// safe for concurrent use by calls writing disjoint outputs.
func (b *Backend) NStepReward(ring, out kernels.Arena, outOff int64, wins []kernels.Window, capacity int64, gamma float64) error {
	return b.NStepRewardColumn(kernels.Column{Ring: ring, StepBytes: 4}, out, outOff, wins, capacity, gamma)
}

// NStepRewardColumn is NStepReward on the float32 column rew of a ring,
// which may be one column of packed records (rew.Stride, rew.Offset; see
// kernels.Column): ring[ix] above is the float32 at byte
// ix*rew.RingStride()+rew.Offset, and the ring holds rows*capacity steps.
// rew.StepBytes must be 4 and the offset and stride multiples of 4; Out,
// OutOff and Pad of rew are ignored. It is safe for concurrent use by
// calls writing disjoint outputs.
func (*Backend) NStepRewardColumn(rew kernels.Column, out kernels.Arena, outOff int64, wins []kernels.Window, capacity int64, gamma float64) error {
	r, err := host(rew.Ring)
	if err != nil {
		return err
	}
	o, err := host(out)
	if err != nil {
		return err
	}
	stride := rew.RingStride()
	steps, ok := rew.RingSteps(r.Size())
	if !ok || rew.StepBytes != 4 || stride%4 != 0 || rew.Offset%4 != 0 || capacity <= 0 || r.Size()%stride != 0 || steps%capacity != 0 {
		return fmt.Errorf("%w: reward ring of %d bytes (stride %d, offset %d, step %d), capacity %d", ErrBounds, r.Size(), stride, rew.Offset, rew.StepBytes, capacity)
	}
	if math.IsNaN(gamma) || gamma < 0 || gamma > 1 {
		return fmt.Errorf("%w: gamma %v outside [0, 1]", ErrBounds, gamma)
	}
	n := int64(len(wins))
	if outOff%4 != 0 || !kernels.Fits(outOff, n, 4, o.Size()) {
		return fmt.Errorf("%w: %d sums at %d into %d bytes", ErrBounds, n, outOff, o.Size())
	}
	rows := steps / capacity
	if i, bad := kernels.BadWindow(wins, rows, capacity); bad {
		return fmt.Errorf("%w: window %d %+v (rows %d, capacity %d)", ErrBounds, i, wins[i], rows, capacity)
	}
	if n == 0 {
		return nil
	}
	ws := stride / 4 // float32 words from one step to the next
	rw := unsafe.Slice((*float32)(unsafe.Pointer(&r.b[rew.Offset])), (r.Size()-rew.Offset)/4)
	ow := unsafe.Slice((*float32)(unsafe.Pointer(&o.b[outOff])), n)
	for i, w := range wins {
		s, g := 0.0, 1.0
		slot := w.Start % capacity // wraps at most once: Len <= capacity
		for j := int64(0); j < w.Len; j++ {
			s = float64(s + float64(g*float64(rw[(w.Row*capacity+slot)*ws])))
			g = float64(g * gamma)
			if slot++; slot == capacity {
				slot = 0
			}
		}
		ow[i] = float32(s)
	}
	return nil
}
