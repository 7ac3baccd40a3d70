package tensorbuf

import (
	"context"
	"fmt"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TableTransitions are transitions made from items sampled from a table:
// item i, Len real steps from Start of its row, becomes the n-step
// transition at its first step, looking k = min(Horizon, Len-1) steps
// ahead and stopping at the episode's end as NStepOptions describes
// (TF-Agents' trajectory.to_transition over num_steps=n+1 sequences, and
// to_n_step_transition for n > 1). Pad steps are never read.
//
// An item that is no transition (it starts at a boundary step, as about
// one window in an episode's length does when a TrajectorySequence
// observer writes two-step items across episodes, or it has a single real
// step) keeps its place in the batch so that Keys, Items and the tensors
// stay aligned, with Valid false: its observation and next observation
// are both those of its first step, reward 0, discount 0, IsDone Running.
// A learner multiplies its loss by Valid (MaskedWeights32 folds the mask
// into the importance weights), as TF-Agents' DQN masks out transitions
// from boundary steps.
//
// The right observer for them is AddTrajectory with SequenceLength n+1
// (TF-Agents' DQN recipe: a ReverbAddTrajectoryObserver with
// sequence_length n+1 and the table sampled with num_steps n+1): it cuts
// its windows at every boundary step, so every item is a valid
// transition. Its n+1-step windows stop n steps before each episode's
// boundary step; with PadEndOfEpisodes and TileEndOfEpisodes it also
// writes the padded windows of the episode's end, which become
// transitions looking fewer steps ahead (their discount gamma^k says how
// far), and one window starting at the boundary step, masked out.
//
// Tensors are shaped [n, ...shape] as Buffer.SampleTransitionsInto shapes
// them; see Transitions. Host returns the tensors only (a *Transitions).
//
// Transitions sampled from a DeviceSelection table on a backend that
// builds them (a TransitionSelector: the cpu and gpu backends) are drawn,
// checked and materialised in backend memory with no host copy and no
// wait: their keys, probabilities, weights, validity and masked weights
// are in KeyTensor & co., and Items, Keys, Probabilities, Weights, Valid,
// Rows and Steps stay empty until HostMeta fills them (which waits for
// the backend). Not safe for concurrent use.
type TableTransitions struct {
	Transitions
	// Items are the sampled items, Keys their keys in the table (for
	// UpdatePriorities), Probabilities the probabilities with which they
	// were selected and Weights their importance weights (1 unless the
	// table is Prioritized with Beta > 0; normalised by the largest
	// weight over the whole table, priority-0 items left out, as
	// Batch.Weights and TableConfig.Beta say).
	Items         []Item
	Keys          []uint64
	Probabilities []float64
	Weights       []float64
	// Valid is false for an item that is no transition (see above).
	Valid []bool
	// TableSize is the number of items in the table when sampled.
	TableSize int
	// KeyTensor (uint64), ProbabilityTensor and WeightTensor (float64),
	// ValidTensor (uint8, 0 or 1) and MaskedWeightTensor (float32:
	// the weight where valid, else 0, as MaskedWeights32), each shaped
	// [n], hold the sample's metadata in backend memory when it was
	// selected on the backend (see above), freed with tr; nil for
	// samples selected on the host.
	KeyTensor, ProbabilityTensor, WeightTensor *tensor.Dense
	ValidTensor, MaskedWeightTensor            *tensor.Dense

	sel      outArena // the device selection: draws, checked windows, KeyTensor & co.
	selN     int
	selT     *Table // the table that selected into sel, for HostMeta
	selWins  []kernels.WinDesc
	nextCols []Column
}

// MaskedWeights32 returns the importance weights as float32, 0 where
// Valid is false, in dst (grown when too short): the per-transition loss
// weights of a learner. For a device-selected sample it needs HostMeta
// first; MaskedWeightTensor holds the same values in backend memory.
func (tr *TableTransitions) MaskedWeights32(dst []float32) []float32 {
	n := len(tr.Weights)
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i, w := range tr.Weights {
		dst[i] = 0
		if tr.Valid[i] {
			dst[i] = float32(w)
		}
	}
	return dst
}

// SampleTransitions samples n items and returns them as transitions. See
// SampleTransitionsInto.
func (t *Table) SampleTransitions(ctx context.Context, n int, opt NStepOptions) (*TableTransitions, error) {
	tr := new(TableTransitions)
	if err := t.SampleTransitionsInto(ctx, tr, n, opt); err != nil {
		return nil, err
	}
	return tr, nil
}

// SampleTransitionsInto selects n items as SampleInto does (any selector;
// the same waiting, rate limiting and MaxTimesSampled rules) and writes
// the transition of each into tr, reusing its memory: the n-step
// transition at the item's first step with Horizon opt.Horizon and
// discount factor opt.DiscountFactor, using only the item's real steps
// (see TableTransitions). Horizon 1 with DiscountFactor 1 gives one-step
// transitions whose reward and discount are the stored ones (with stored
// discounts 0 or 1). Items of Horizon+1 steps give full n-step
// transitions.
//
// On a DeviceSelection table whose backend is a TransitionSelector the
// whole call runs on the backend (see TableTransitions): the same items
// and the same bytes as a host-selected table of the same seed, with the
// host slices left for HostMeta; a call that fails there consumes no item.
//
// With opt.Stack the observation fields it names are stacked over their
// last K frames (see FrameStack), on the backend too for a
// DeviceSelection table whose backend is also a FrameStacker; an item
// whose stack reaches a step the ring has overwritten comes with Valid
// false.
//
// It fails with ErrInvalidArg (consuming nothing) for n below 1, a nil tr
// or bad options, ErrConfig (consuming nothing) for a bad opt.Stack, and
// as SampleInto fails otherwise. It is safe for
// concurrent use with writers, inserters and other samplers; tr is not.
// Once tr's memory is large enough the call allocates nothing.
func (t *Table) SampleTransitionsInto(ctx context.Context, tr *TableTransitions, n int, opt NStepOptions) error {
	if n <= 0 || tr == nil {
		return fmt.Errorf("%w: sample of %d transitions", ErrInvalidArg, n)
	}
	if err := opt.validate(); err != nil {
		return err
	}
	if err := t.checkBatch(n); err != nil {
		return err
	}
	if err := t.b.checkTransitionsSize("table transitions", n, int64(opt.Horizon), 4); err != nil {
		return err
	}
	plan, err := t.b.stackPlan(opt.Stack, &tr.splan)
	if err != nil {
		return err
	}
	if err := t.b.stackSize("table transitions", n, plan); err != nil {
		return err
	}
	tr.want = plan
	// Try first, wait only when not yet served (as SampleInto).
	if err := t.ctxErr(ctx); err != nil {
		return err
	}
	for {
		done, err := t.sampleTransitionsOnce(tr, n, opt)
		if done {
			return err
		}
		if err := t.waitN(ctx, t.canSampleLocked, n); err != nil {
			return err
		}
	}
}

// sampleTransitionsOnce samples if the table can still serve n samples;
// done is false when it no longer can and the caller must wait again.
func (t *Table) sampleTransitionsOnce(tr *TableTransitions, n int, opt NStepOptions) (done bool, err error) {
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return true, fmt.Errorf("%w: SampleTransitions", ErrClosed)
	}
	t.mu.Lock()
	rec := t.dev.recOrNil()
	if rec != nil {
		err := t.roundChangedLocked()
		if err == nil && !t.canSampleLocked(n) {
			err = fmt.Errorf("%w: table %q: a recorded round's sample of %d cannot wait for the rate limiter", ErrInvalidArg, t.cfg.Name, n)
		}
		if err != nil {
			t.mu.Unlock()
			return true, err
		}
	}
	if !t.canSampleLocked(n) {
		t.mu.Unlock()
		return false, nil
	}
	if t.dev != nil {
		ts, ok := b.be.(TransitionSelector)
		if _, fs := b.be.(FrameStacker); ok && (fs || tr.want == nil) {
			return true, t.sampleTransitionsDevLocked(ts, tr, n, opt)
		}
	}
	if rec != nil {
		t.mu.Unlock()
		return true, fmt.Errorf("%w: table %q: a round records device-selected samples only (this one selects on the host)", ErrInvalidArg, t.cfg.Name)
	}
	tr.retireSel()
	// Take the memory first: a failed allocation consumes no item.
	if _, err := b.reserve(&tr.Transitions, int64(n)); err != nil {
		t.mu.Unlock()
		return true, err
	}
	tr.TableSize = len(t.live)
	t.selectLocked(n, selection{items: &tr.Items, keys: &tr.Keys, probs: &tr.Probabilities, weights: &tr.Weights})
	t.mu.Unlock()
	// The items' steps stay stored while b.mu is held, even if an item
	// left the table by MaxTimesSampled.
	h := int64(opt.Horizon)
	wins := grow(&tr.wins, n)
	valid := grow(&tr.Valid, n)
	tr.Rows, tr.Steps = tr.Rows[:0], tr.Steps[:0]
	for i, it := range tr.Items {
		k := int64(0)
		if !b.isBoundary(it.Row, it.Start) {
			k = b.nstepLen(it.Row, it.Start, min(h, int64(it.Len)-1))
		}
		wins[i] = Window{Row: int64(it.Row), Start: it.Start, Len: k}
		valid[i] = k > 0
		tr.Rows, tr.Steps = append(tr.Rows, it.Row), append(tr.Steps, it.Start)
	}
	if err := b.materialiseWindows(&tr.Transitions, opt.DiscountFactor); err != nil {
		return true, err
	}
	for i, l := range tr.lost[:n] {
		// Frames of a stack overwritten by the ring (FrameStack).
		valid[i] = valid[i] && !l
	}
	return true, tr.views(b.be, 0, n)
}
