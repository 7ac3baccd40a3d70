//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// NStepReward writes the discounted sum of up to capacity float32 rewards
// per window of a ring shaped [rows, capacity] (a buffer's reward column),
// for n-step transitions, in one kernel launch (kernels/nstep_reward.cu,
// one thread per window):
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
// Sums are accumulated in double precision, every product and sum rounded
// on its own (no fused multiply-add), and rounded once to float32, so the
// results equal cpu.Backend.NStepReward's bit for bit (NaN payloads
// aside: a NaN reward gives a NaN sum, whose bits the device may choose).
//
// ring and out are arenas of this backend; outOff is a byte offset, a
// multiple of 4, and out must hold len(wins) floats from it. capacity
// must be positive and divide the ring into whole rows of float32;
// every window needs 0 <= Row < rows, Start >= 0 and 0 <= Len <=
// capacity; gamma must lie in [0, 1]. On any violation it returns an error
// wrapping ErrBounds (ErrArena for a foreign or freed arena) and queues
// nothing. No windows means no launch. It returns once the launch is
// queued; wins may be reused at once. It is safe for concurrent use.
func (b *Backend) NStepReward(ring, out kernels.Arena, outOff int64, wins []kernels.Window, capacity int64, gamma float64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.nstepReward(kernels.Column{Ring: ring, StepBytes: 4}, out, outOff, wins, capacity, gamma)
}

// NStepRewardColumn is NStepReward on the float32 column rew of a ring,
// which may be one column of packed records (rew.Stride, rew.Offset; see
// kernels.Column and cpu.Backend.NStepRewardColumn, its reference):
// rew.StepBytes must be 4 and the offset and stride multiples of 4; Out,
// OutOff and Pad of rew are ignored. It is safe for concurrent use.
func (b *Backend) NStepRewardColumn(rew kernels.Column, out kernels.Arena, outOff int64, wins []kernels.Window, capacity int64, gamma float64) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.nstepReward(rew, out, outOff, wins, capacity, gamma)
}

func (b *Backend) nstepReward(rew kernels.Column, out kernels.Arena, outOff int64, wins []kernels.Window, capacity int64, gamma float64) error {
	r, o, stride, rows, err := b.rewardArenas(rew, out, capacity, gamma)
	if err != nil {
		return err
	}
	n := int64(len(wins))
	if outOff%4 != 0 || !kernels.Fits(outOff, n, 4, o.size) {
		return fmt.Errorf("%w: %d sums at %d into %d bytes", ErrBounds, n, outOff, o.size)
	}
	if i, bad := kernels.BadWindow(wins, rows, capacity); bad {
		return fmt.Errorf("%w: window %d %+v (rows %d, capacity %d)", ErrBounds, i, wins[i], rows, capacity)
	}
	if n == 0 {
		return nil
	}
	var l layout
	winOff := l.add(n * kernels.WinDescSize)
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(l.n)
	wd := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&buf[winOff])), n)
	for i, w := range wins {
		wd[i] = kernels.WinDesc{Row: w.Row, Start: w.Start % capacity, Len: w.Len}
	}
	return b.launch(kernels.NStepReward, st, l.n, n, 1, 1,
		ringAddr(r, &rew), uint64(o.ptr)+uint64(outOff), uint64(st.dev)+uint64(winOff),
		uint64(n), uint64(capacity), math.Float64bits(gamma), uint64(stride))
}

// Launches returns the number of kernel launches this backend has issued
// so far (every Scatter, GatherRows, Concat, GatherWindows and
// NStepReward that had work to do launches one kernel). It is safe for
// concurrent use.
func (b *Backend) Launches() int64 { return b.launches.Load() }

// rewardArenas looks up the reward column's ring and the output of an
// n-step reward sum and checks the ring's layout (float32 rewards, whole
// rows of capacity steps) and gamma, for NStepRewardColumn and
// NStepRewardAt. It returns the ring's stride and rows.
func (b *Backend) rewardArenas(rew kernels.Column, out kernels.Arena, capacity int64, gamma float64) (r, o *Arena, stride, rows int64, err error) {
	if r, err = b.arena(rew.Ring); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("n-step reward ring: %w", err)
	}
	if o, err = b.arena(out); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("n-step reward output: %w", err)
	}
	stride = rew.RingStride()
	steps, ok := rew.RingSteps(r.size)
	if !ok || rew.StepBytes != 4 || stride%4 != 0 || rew.Offset%4 != 0 || capacity <= 0 || r.size%stride != 0 || steps%capacity != 0 {
		return nil, nil, 0, 0, fmt.Errorf("%w: reward ring of %d bytes (stride %d, offset %d, step %d), capacity %d", ErrBounds, r.size, stride, rew.Offset, rew.StepBytes, capacity)
	}
	if math.IsNaN(gamma) || gamma < 0 || gamma > 1 {
		return nil, nil, 0, 0, fmt.Errorf("%w: gamma %v outside [0, 1]", ErrBounds, gamma)
	}
	return r, o, stride, steps / capacity, nil
}
