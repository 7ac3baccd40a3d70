package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/kernels"
)

// mirror checks m's arenas and returns its records and live list.
func mirror(m kernels.Mirror) ([]kernels.ItemRec, []int32, error) {
	it, err := host(m.Items)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror items: %w", err)
	}
	lv, err := host(m.Live)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror live list: %w", err)
	}
	if m.Slots < 0 || m.ItemsOff%8 != 0 || m.LiveOff%4 != 0 ||
		!kernels.Fits(m.ItemsOff, m.Slots, kernels.ItemRecSize, it.Size()) || !kernels.Fits(m.LiveOff, m.Slots, kernels.LiveSize, lv.Size()) {
		return nil, nil, fmt.Errorf("%w: mirror of %d slots at %d/%d in %d/%d bytes", ErrBounds, m.Slots, m.ItemsOff, m.LiveOff, it.Size(), lv.Size())
	}
	if m.Slots == 0 {
		return nil, nil, nil
	}
	recs := unsafe.Slice((*kernels.ItemRec)(unsafe.Pointer(&it.b[m.ItemsOff])), m.Slots)
	live := unsafe.Slice((*int32)(unsafe.Pointer(&lv.b[m.LiveOff])), m.Slots)
	return recs, live, nil
}

// roundOf checks m's round block (kernels.Mirror.Round) and returns its
// words, nil for a mirror without one.
func roundOf(m kernels.Mirror) ([]uint64, error) {
	if m.Round == nil {
		return nil, nil
	}
	r, err := host(m.Round)
	if err != nil {
		return nil, fmt.Errorf("mirror round block: %w", err)
	}
	if m.RoundOff%8 != 0 || !kernels.Fits(m.RoundOff, kernels.RoundWords, 8, r.Size()) {
		return nil, fmt.Errorf("%w: round block of %d words at %d in %d bytes", ErrBounds, kernels.RoundWords, m.RoundOff, r.Size())
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&r.b[m.RoundOff])), kernels.RoundWords), nil
}

// inRound returns d with its round block's counters applied (as the
// kernels do: see kernels.Mirror.Round), d itself without one.
func inRound(d kernels.UniformDraw) (kernels.UniformDraw, []uint64, error) {
	r, err := roundOf(d.Mirror)
	if err != nil || r == nil {
		return d, nil, err
	}
	d.Call += r[kernels.RoundCall]
	d.NLive = int64(r[kernels.RoundNLive])
	d.Prob = math.Float64frombits(r[kernels.RoundProb])
	return d, r, nil
}

// PatchItems writes changed records and live entries into a table's
// mirror (the reference of kernels/patch_items.cu):
//
//	for _, p := range items { recs[p.Slot] = p.Rec }
//	for _, p := range live { live[p.Pos] = int32(p.Slot) }
//
// Every Slot, Pos and live Slot must lie in [0, m.Slots), or it returns an
// error wrapping ErrBounds and writes nothing. With a sum tree
// (m.TreeN > 0) it also writes each patch's Weight to its slot's leaf
// (slots must then lie below TreeN) and repairs the groups above the
// patched leaves, so that a tree consistent before stays consistent
// (RepairTree repairs one whole). It is safe for concurrent use on
// distinct mirrors.
func (*Backend) PatchItems(m kernels.Mirror, items []kernels.ItemPatch, live []kernels.LivePatch) error {
	recs, lv, err := mirror(m)
	if err != nil {
		return err
	}
	if problem := kernels.BadPatch(m.Slots, items, live); problem != "" {
		return fmt.Errorf("%w: %s", ErrBounds, problem)
	}
	leaves, err := treeOf(m)
	if err != nil {
		return err
	}
	if leaves != nil {
		for _, p := range items {
			if p.Slot >= m.TreeN {
				return fmt.Errorf("%w: item patch of slot %d past the tree's %d leaves", ErrBounds, p.Slot, m.TreeN)
			}
		}
	}
	for _, p := range items {
		recs[p.Slot] = p.Rec
		if leaves != nil {
			leaves[p.Slot] = p.Weight
		}
	}
	for _, p := range live {
		lv[p.Pos] = int32(p.Slot)
	}
	if leaves != nil {
		repairAbove(leaves, m.TreeN, items)
	}
	return nil
}

// DrawUniform selects d.N items uniformly from a mirror with the tables'
// Philox draws (the reference of kernels/draw_uniform.cu; see
// kernels.UniformDraw for the loop; a round block's counters apply as
// kernels.Mirror.Round says). It checks the arguments and every live
// entry it reads, returning an error wrapping ErrBounds before writing
// anything. It is safe for concurrent use by calls writing disjoint
// outputs.
func (*Backend) DrawUniform(d kernels.UniformDraw) error {
	recs, live, err := mirror(d.Mirror)
	if err != nil {
		return err
	}
	if d, _, err = inRound(d); err != nil {
		return err
	}
	o, err := host(d.Out)
	if err != nil {
		return fmt.Errorf("draw output: %w", err)
	}
	if d.NLive <= 0 || d.NLive > d.Mirror.Slots || d.N < 0 || d.Capacity <= 0 {
		return fmt.Errorf("%w: %d draws from %d live items of %d slots, capacity %d", ErrBounds, d.N, d.NLive, d.Mirror.Slots, d.Capacity)
	}
	if !drawOut(o, d) {
		return fmt.Errorf("%w: %d draws at %d/%d/%d/%d into %d bytes", ErrBounds, d.N, d.WinOff, d.KeyOff, d.ProbOff, d.WeightOff, o.Size())
	}
	if err := checkDrawn(d.Seed, d.Call, d.N, live[:d.NLive], d.Mirror.Slots); err != nil {
		return err
	}
	if d.N == 0 {
		return nil
	}
	wins, keys, probs, weights := drawViews(o, d)
	for k := range d.N {
		x := philox.Draw(d.Seed, 0, d.Call, uint32(k))
		r := &recs[live[philox.Index(x, uint64(d.NLive))]]
		wins[k] = kernels.WinDesc{Row: r.Row, Start: r.Start % d.Capacity, Len: r.Len}
		keys[k], probs[k], weights[k] = r.Key, d.Prob, 1
	}
	return nil
}

// checkDrawn checks the live entries that n uniform draws will read (a
// first pass over the draws: Philox is cheap, and checking the whole live
// list would cost as much as a host selection).
func checkDrawn(seed, call uint64, n int64, live []int32, slots int64) error {
	for k := range n {
		if s := live[philox.Index(philox.Draw(seed, 0, call, uint32(k)), uint64(len(live)))]; s < 0 || int64(s) >= slots {
			return fmt.Errorf("%w: live slot %d of %d", ErrBounds, s, slots)
		}
	}
	return nil
}

// drawViews returns the outputs of d's draws in o (checked by drawOut).
func drawViews(o *Arena, d kernels.UniformDraw) (wins []kernels.WinDesc, keys []uint64, probs, weights []float64) {
	wins = unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&o.b[d.WinOff])), d.N)
	keys = unsafe.Slice((*uint64)(unsafe.Pointer(&o.b[d.KeyOff])), d.N)
	probs = unsafe.Slice((*float64)(unsafe.Pointer(&o.b[d.ProbOff])), d.N)
	weights = unsafe.Slice((*float64)(unsafe.Pointer(&o.b[d.WeightOff])), d.N)
	return wins, keys, probs, weights
}

// drawOut reports whether the outputs of d fit o, 8-byte aligned.
func drawOut(o *Arena, d kernels.UniformDraw) bool {
	return d.WinOff%8 == 0 && d.KeyOff%8 == 0 && d.ProbOff%8 == 0 && d.WeightOff%8 == 0 &&
		kernels.Fits(d.WinOff, d.N, kernels.WinDescSize, o.Size()) && kernels.Fits(d.KeyOff, d.N, 8, o.Size()) &&
		kernels.Fits(d.ProbOff, d.N, 8, o.Size()) && kernels.Fits(d.WeightOff, d.N, 8, o.Size())
}

// GatherWindowsAt is GatherWindows with the windows read from backend
// memory: nwin WinDesc records (kernels.WinDesc, as DrawUniform writes
// them) from byte offset winOff of wins, a multiple of 8. The windows are
// checked as GatherWindows checks them. It is safe for concurrent use by
// calls writing disjoint outputs.
func (b *Backend) GatherWindowsAt(cols []kernels.Column, wins kernels.Arena, winOff, nwin, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	w, err := host(wins)
	if err != nil {
		return fmt.Errorf("windows: %w", err)
	}
	if winOff%8 != 0 || !kernels.Fits(winOff, nwin, kernels.WinDescSize, w.Size()) {
		return fmt.Errorf("%w: %d windows at %d into %d bytes", ErrBounds, nwin, winOff, w.Size())
	}
	var ws []kernels.Window
	if nwin > 0 {
		// kernels.Window and WinDesc share their layout (three int64).
		ws = unsafe.Slice((*kernels.Window)(unsafe.Pointer(&w.b[winOff])), nwin)
	}
	return b.GatherWindows(cols, ws, seqLen, capacity, mask, maskOff)
}
