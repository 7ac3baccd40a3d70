package tensorbuf

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TransitionSelector is implemented by backends that also build a
// DeviceSelection table's transitions in their memory: the n-step check
// of each drawn item against the table's mirror of the per-step metadata
// (kernels.TransitionCheck, kernels/nstep_check.cu) and the n-step reward
// sums over windows in backend memory. With it, SampleTransitionsInto on
// a DeviceSelection table draws, checks and materialises on the backend
// with no host copy of the sample and no wait; without it the table's
// transitions are selected on the host. See cpu.Backend's methods for the
// reference loops. Implementations must be safe for concurrent use on
// distinct mirrors and outputs.
type TransitionSelector interface {
	ItemSelector
	// NStepCheck computes each drawn item's n-step length and writes the
	// windows and per-transition values of c.
	NStepCheck(c kernels.TransitionCheck) error
	// NStepRewardAt is NStepper.NStepRewardColumn with n windows read
	// from backend memory (kernels.WinDesc records at byte winOff of
	// wins).
	NStepRewardAt(rew Column, out Arena, outOff int64, wins Arena, winOff, n, capacity int64, gamma float64) error
}

var _ TransitionSelector = (*cpu.Backend)(nil)

// transSelSpecs lays out a device-selected TableTransitions' selection,
// one "step" per item: the draw's windows, keys, probabilities and
// weights (as metaSpecs), then the check's n-step, current-step and
// next-step windows, validity bytes and masked float32 weights.
var transSelSpecs = []outSpec{
	{name: "windows", dtype: Int64, stepBytes: kernels.WinDescSize},
	{name: "keys", dtype: Int64, stepBytes: 8},
	{name: "probabilities", dtype: Float64, stepBytes: 8},
	{name: "weights", dtype: Float64, stepBytes: 8},
	{name: "n-step windows", dtype: Int64, stepBytes: kernels.WinDescSize},
	{name: "current windows", dtype: Int64, stepBytes: kernels.WinDescSize},
	{name: "next windows", dtype: Int64, stepBytes: kernels.WinDescSize},
	{name: "valid", dtype: Uint8, stepBytes: 1},
	{name: "masked weights", dtype: Float32, stepBytes: 4},
}

const (
	selWins = iota
	selKeys
	selProbs
	selWeights
	selSteps
	selCur
	selNext
	selValid
	selMasked
)

// metaMirror is a DeviceSelection table's mirror of the buffer's
// per-step metadata byte (b.meta) and of the rows' cursors in backend
// memory, which the n-step check reads. It is brought up to date before
// each device-selected transition sample (syncMetaLocked): every write
// to b.meta lands at a row's newest step or the one before it (Writer's
// commit, MarkCut, ExperienceWriter), so the steps from one before the
// cursor last synced up to the cursor, and the newest step's byte when
// it changed in place, are all that can differ. When no step was added
// and no cut marked since the last sync (the buffer's Stats), nothing is
// scanned: only an ExperienceWriter's in-place rewrite of a row's newest
// step can then differ, a byte the check never reads (a transition at
// step t reads t+k-1 <= cursor-2), and the next add sends it. A buffer
// restored from a checkpoint has new tables, whose mirrors start empty
// and are written whole. Guarded by the table's mutex.
type metaMirror struct {
	arena  outArena
	specs  []outSpec
	synced []int64 // cursor per row at the last sync (empty: write it whole)
	last   []uint8 // the byte of each row's newest step at the last sync
	steps  int64   // b.stats.Steps and Cuts at the last sync
	cuts   int64
	idx    []int64 // scratch: steps to scatter
	src    []byte  // scratch: their bytes
}

// syncMetaLocked brings the table's metadata mirror up to date with b.meta
// and b.cursor: one scatter of the changed bytes and one upload of the
// cursors (both queued, neither waited for), or one upload of the whole
// mirror the first time. The caller holds b.mu (at least for reading:
// b.meta only changes under its write lock) and t.mu.
func (t *Table) syncMetaLocked() error {
	b, mm := t.b, &t.dev.meta
	rows, c := int64(b.numEnvs), b.capacity
	if mm.arena.arena == nil {
		if mm.specs == nil {
			mm.specs = []outSpec{{name: "step metadata", dtype: Uint8, stepBytes: c}, {name: "cursors", dtype: Int64, stepBytes: 8}}
		}
		if _, err := mm.arena.ensure(b.be, mm.specs, rows); err != nil {
			return err
		}
		mm.synced = mm.synced[:0]
	}
	if len(mm.synced) != int(rows) {
		// A new arena: write it whole.
		if err := b.be.Upload(mm.arena.arena, mm.arena.offs[0], b.meta); err != nil {
			return fmt.Errorf("%w: metadata mirror: %w", ErrBackend, err)
		}
		if err := b.be.Upload(mm.arena.arena, mm.arena.offs[1], rawbytes.Of(b.cursor)); err != nil {
			return fmt.Errorf("%w: cursor mirror: %w", ErrBackend, err)
		}
		mm.synced, mm.last = grow(&mm.synced, int(rows)), grow(&mm.last, int(rows))
		for r := range mm.synced {
			mm.synced[r], mm.last[r] = b.cursor[r], b.newestMeta(r)
		}
		mm.steps, mm.cuts = b.stats.Steps, b.stats.Cuts
		return nil
	}
	if b.stats.Steps == mm.steps && b.stats.Cuts == mm.cuts {
		// No step added and no cut marked since the last sync: every
		// byte the check reads is current (see metaMirror).
		return nil
	}
	idx, src := mm.idx[:0], mm.src[:0]
	moved := false
	for r := range int(rows) {
		cur, s0 := b.cursor[r], mm.synced[r]
		if cur == s0 && b.newestMeta(r) == mm.last[r] {
			continue
		}
		lo := max(s0-1, cur-c, 0) // cursors only grow
		base := int64(r) * c
		for p := lo; p < cur; p++ {
			ix := base + p%c
			idx, src = append(idx, ix), append(src, b.meta[ix])
		}
		moved = moved || cur != s0
	}
	mm.idx, mm.src = idx, src
	if len(idx) > 0 {
		col := []Column{{Ring: mm.arena.arena, StepBytes: 1}}
		if mm.arena.offs[0] != 0 {
			return fmt.Errorf("%w: metadata mirror at offset %d", ErrBackend, mm.arena.offs[0])
		}
		if err := b.be.Scatter(col, [][]byte{src}, idx); err != nil {
			mm.synced = mm.synced[:0] // unknown contents: write it whole next time
			return fmt.Errorf("%w: metadata mirror: %w", ErrBackend, err)
		}
	}
	if moved {
		if err := b.be.Upload(mm.arena.arena, mm.arena.offs[1], rawbytes.Of(b.cursor)); err != nil {
			mm.synced = mm.synced[:0]
			return fmt.Errorf("%w: cursor mirror: %w", ErrBackend, err)
		}
	}
	for r := range int(rows) {
		mm.synced[r], mm.last[r] = b.cursor[r], b.newestMeta(r)
	}
	mm.steps, mm.cuts = b.stats.Steps, b.stats.Cuts
	return nil
}

// newestMeta returns the metadata byte of a row's newest step (0 for an
// empty row).
func (b *Buffer) newestMeta(row int) uint8 {
	if b.cursor[row] == 0 {
		return 0
	}
	return b.metaAt(row, b.cursor[row]-1)
}

// sampleTransitionsDevLocked selects n items on the backend and builds
// their transitions there: patch the item mirror, sync the metadata
// mirror, draw (one launch), check (one launch), gather the current and
// next steps' fields (two launches), sum the n-step rewards (one launch).
// Nothing is copied back and nothing waits. Every launch is queued while
// t.mu is held and the table's call is counted only once all succeeded,
// so a failed call consumes no item and draws the same items when
// retried. The caller holds b.mu for reading and t.mu, which this
// unlocks, and has checked canSampleLocked(n) and the sample's size.
func (t *Table) sampleTransitionsDevLocked(ts TransitionSelector, tr *TableTransitions, n int, opt NStepOptions) error {
	b := t.b
	defer t.mu.Unlock()
	if _, err := b.reserve(&tr.Transitions, int64(n)); err != nil {
		return err
	}
	srealloc, err := tr.sel.ensure(b.be, transSelSpecs, int64(n))
	if err != nil {
		return err
	}
	if err := t.flushMirrorLocked(); err != nil {
		return err
	}
	if err := t.syncMetaLocked(); err != nil {
		return err
	}
	so, sa := tr.sel.offs, tr.sel.arena
	mir, call, _ := t.roundMirror()
	d := kernels.UniformDraw{
		Mirror: mir, NLive: int64(len(t.live)), Seed: t.cfg.Seed, Call: call,
		Prob: 1 / float64(len(t.live)), Capacity: b.capacity, N: int64(n),
		Out: sa, WinOff: so[selWins], KeyOff: so[selKeys], ProbOff: so[selProbs], WeightOff: so[selWeights],
	}
	if t.dev.prio != nil {
		err = t.dev.prio.DrawPrioritized(kernels.PrioritizedDraw{UniformDraw: d, Beta: t.cfg.Beta})
	} else {
		err = t.dev.sel.DrawUniform(d)
	}
	if err != nil {
		return fmt.Errorf("%w: device selection: %w", ErrBackend, err)
	}
	out := tr.out
	k := b.nUser + tr.nObs
	mm := &t.dev.meta
	if err := ts.NStepCheck(kernels.TransitionCheck{
		Meta: mm.arena.arena, MetaOff: mm.arena.offs[0], Cursors: mm.arena.arena, CursorsOff: mm.arena.offs[1],
		Rows: int64(b.numEnvs), Capacity: b.capacity, Horizon: int64(opt.Horizon), Gamma: opt.DiscountFactor, N: int64(n),
		Sel: sa, WinOff: so[selWins], WeightOff: so[selWeights], StepsOff: so[selSteps], CurOff: so[selCur], NextOff: so[selNext],
		ValidOff: so[selValid], MaskedOff: so[selMasked], Out: out.arena, DiscOff: out.offs[k+1], DoneOff: out.offs[k+2],
	}); err != nil {
		return fmt.Errorf("%w: n-step check: %w", ErrBackend, err)
	}
	cur, next := tr.cols[:0], tr.nextCols[:0]
	nextSpec := b.nUser
	for i := range b.nUser {
		col := b.ring[i]
		col.Out, col.OutOff = out.arena, out.offs[i]
		if tr.stacked(i) {
			// One launch writes both stacks (kernels/stack_gather.cu),
			// after the check that wrote the windows.
			if err := b.be.(FrameStacker).StackGather(kernels.FrameStackGather{
				Col: col, NextOut: out.arena, NextOutOff: out.offs[nextSpec], K: int64(tr.stack[i]), N: int64(n),
				Rows: int64(b.numEnvs), Capacity: b.capacity,
				Sel: sa, CurOff: so[selCur], NextOff: so[selNext], ValidOff: so[selValid], MaskedOff: so[selMasked], Mark: true,
				Meta: mm.arena.arena, MetaOff: mm.arena.offs[0], Cursors: mm.arena.arena, CursorsOff: mm.arena.offs[1],
			}); err != nil {
				return fmt.Errorf("%w: frame-stack gather: %w", ErrBackend, err)
			}
			nextSpec++
			continue
		}
		cur = append(cur, col)
		if b.cols[i].Role == Observation {
			col.OutOff = out.offs[nextSpec]
			next = append(next, col)
			nextSpec++
		}
	}
	tr.cols, tr.nextCols = cur, next
	if err := ts.GatherWindowsAt(cur, sa, so[selCur], int64(n), 1, b.capacity, nil, 0); err != nil {
		return fmt.Errorf("%w: gather current steps: %w", ErrBackend, err)
	}
	if len(next) > 0 {
		if err := ts.GatherWindowsAt(next, sa, so[selNext], int64(n), 1, b.capacity, nil, 0); err != nil {
			return fmt.Errorf("%w: gather next steps: %w", ErrBackend, err)
		}
	}
	if err := ts.NStepRewardAt(b.ring[b.nUser+colReward], out.arena, out.offs[k], sa, so[selSteps], int64(n), b.capacity, opt.DiscountFactor); err != nil {
		return fmt.Errorf("%w: n-step reward: %w", ErrBackend, err)
	}
	if err := tr.views(b.be, 0, n); err != nil {
		return err
	}
	if err := tr.selViews(b.be, n, srealloc); err != nil {
		return err
	}
	t.noteDraw(tr, n)
	t.calls++
	t.samples += int64(n)
	tr.sawDevSample(t)
	t.notifyLocked()
	return nil
}

// selViews sets the device tensors of a device-selected sample over
// tr.sel, anew when its memory or n changed.
func (tr *TableTransitions) selViews(be Backend, n int, rebuild bool) error {
	if !rebuild && tr.selN == n && tr.KeyTensor != nil {
		return nil
	}
	tr.retireSel()
	o := &tr.sel
	views := []struct {
		d   **tensor.Dense
		i   int
		typ tensor.Dtype
	}{
		{&tr.KeyTensor, selKeys, tensor.Uint64},
		{&tr.ProbabilityTensor, selProbs, tensor.Float64},
		{&tr.WeightTensor, selWeights, tensor.Float64},
		{&tr.ValidTensor, selValid, tensor.Uint8},
		{&tr.MaskedWeightTensor, selMasked, tensor.Float32},
	}
	for _, v := range views {
		d, err := o.tensor(be, o.offs[v.i], v.typ, n)
		if err != nil {
			tr.retireSel()
			return fmt.Errorf("%w: %w", ErrBackend, err)
		}
		*v.d = d
	}
	tr.selN = n
	return nil
}

// retireSel empties and drops the device tensors of a device-selected
// sample (a host selection into tr, a new layout).
func (tr *TableTransitions) retireSel() {
	for _, d := range []*tensor.Dense{tr.KeyTensor, tr.ProbabilityTensor, tr.WeightTensor, tr.ValidTensor, tr.MaskedWeightTensor} {
		retire(d, replaced)
	}
	tr.KeyTensor, tr.ProbabilityTensor, tr.WeightTensor, tr.ValidTensor, tr.MaskedWeightTensor = nil, nil, nil, nil, nil
	tr.selN, tr.selT = 0, nil
}

// HostMeta fills the host slices of transitions sampled from a
// DeviceSelection table (Keys, Probabilities, Weights, Valid, Rows,
// Steps, Items) from the sample's device tensors, waiting for the
// backend first: Items[i] is the item of Keys[i] as the table holds it
// when HostMeta runs, or the zero Item when it has left the table since
// the sample (as Batch.HostMeta); Rows[i] is the item's row and Steps[i]
// its first step, -1 when the item has left the table. A learner that
// stays on the device never calls it (it reads KeyTensor,
// MaskedWeightTensor and the transitions' tensors). It reuses the slices'
// memory. On transitions selected on the host it does nothing. It is not
// safe for concurrent use with other calls on tr; it is with calls on the
// table.
func (tr *TableTransitions) HostMeta() error {
	if tr.KeyTensor == nil {
		return nil
	}
	o := &tr.sel
	n := tr.selN
	keys, probs, weights := grow(&tr.Keys, n), grow(&tr.Probabilities, n), grow(&tr.Weights, n)
	valid := grow(&tr.Valid, n)
	wins := grow(&tr.selWins, n)
	if err := o.download([]hostPart{
		{rawbytes.Of(keys), o.offs[selKeys]},
		{rawbytes.Of(probs), o.offs[selProbs]},
		{rawbytes.Of(weights), o.offs[selWeights]},
		{unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(valid))), n), o.offs[selValid]},
		{unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(wins))), n*kernels.WinDescSize), o.offs[selSteps]},
	}); err != nil {
		return err
	}
	items, rows, steps := grow(&tr.Items, n), grow(&tr.Rows, n), grow(&tr.Steps, n)
	tr.selT.itemsByKey(keys, items, steps)
	for i := range keys {
		rows[i] = int(wins[i].Row)
	}
	return nil
}

// Release frees the transitions' backend memory (Transitions.Release) and
// that of a device-selected sample's metadata (KeyTensor & co., emptied).
func (tr *TableTransitions) Release() error {
	tr.retireSel()
	serr := tr.sel.release()
	if err := tr.Transitions.Release(); err != nil {
		return err
	}
	return serr
}
