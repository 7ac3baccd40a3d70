//go:build trajring_cuda

package gpu

import (
	"fmt"

	"github.com/trajring/trajring/kernels"
)

// StackGather runs a frame-stack gather (kernels.FrameStackGather) in
// one launch of kernels/stack_gather.cu: grid y 0 writes the current
// steps' stacked frames, y 1 the next steps', lanes sharing each frame as
// in the window gather. Nothing is copied to the device and nothing is
// waited for. Arenas and sizes are checked as the cpu backend checks them
// (ErrBounds, nothing queued); the windows cannot be (they are in device
// memory): each must have 0 <= Row < Rows and 0 <= Start < Capacity, as
// the n-step check writes them. It is safe for concurrent use.
func (b *Backend) StackGather(g kernels.FrameStackGather) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	ring, err := b.arena(g.Col.Ring)
	if err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	out, err := b.arena(g.Col.Out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	var nextPtr uint64
	var nextSize int64
	if g.NextOut != nil {
		next, err := b.arena(g.NextOut)
		if err != nil {
			return fmt.Errorf("next output: %w", err)
		}
		if next == ring {
			return fmt.Errorf("%w: frame-stack gather writes its ring", ErrBounds)
		}
		nextPtr, nextSize = uint64(next.ptr)+uint64(g.NextOutOff), next.size
	}
	sel, err := b.arena(g.Sel)
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	meta, err := b.arena(g.Meta)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	cu, err := b.arena(g.Cursors)
	if err != nil {
		return fmt.Errorf("cursors: %w", err)
	}
	if bad := g.Bad(ring.size, out.size, nextSize, sel.size, meta.size, cu.size); bad != "" {
		return fmt.Errorf("%w: frame-stack gather: %s", ErrBounds, bad)
	}
	if out == ring {
		return fmt.Errorf("%w: frame-stack gather writes its ring", ErrBounds)
	}
	if g.N == 0 {
		return nil
	}
	s := uint64(sel.ptr)
	var valid, masked uint64
	if g.Mark {
		valid, masked = s+uint64(g.ValidOff), s+uint64(g.MaskedOff)
	}
	gy := int64(1)
	if nextPtr != 0 {
		gy = 2
	}
	ra, oa := ringAddr(ring, &g.Col), uint64(out.ptr)+uint64(g.Col.OutOff)
	words := maxWords([]kernels.ColDesc{{Ring: ra, Out: oa, Next: nextPtr, Step: g.Col.StepBytes, Stride: g.Col.RingStride()}})
	return b.launchGrid(kernels.StackGather, g.N*g.K, words, gy,
		ra, uint64(g.Col.RingStride()), uint64(g.Col.StepBytes), oa, nextPtr,
		s+uint64(g.CurOff), s+uint64(g.NextOff), uint64(g.N), uint64(g.K), uint64(g.Capacity),
		uint64(meta.ptr)+uint64(g.MetaOff), uint64(cu.ptr)+uint64(g.CursorsOff), valid, masked)
}
