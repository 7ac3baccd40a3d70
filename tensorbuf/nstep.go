package tensorbuf

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/cpu"
)

// NStepOptions ask for n-step transitions.
//
// The n-step transition at step t of a row keeps the fields at t and
// looks k steps ahead, where k is the smallest of
//
//   - Horizon (n);
//   - j, for the first step t+j-1 whose next_step_type is Last (the
//     episode's last transition: n-step returns never cross an episode);
//   - Cursor-1-t: the steps after the newest stored step do not exist yet,
//     so a transition near a row's write cursor is truncated there and
//     bootstraps from the newest stored step (see below for why).
//
// With gamma = DiscountFactor:
//
//   - Reward = sum_{j<k} gamma^j * reward(t+j) (the stored rewards);
//   - NextObservation = the observation fields at step t+k;
//   - Discount = 0 when step t+k-1 terminates the episode (Last with
//     discount 0), gamma^k otherwise, after a truncation (Last with
//     discount > 0) too, so that reward + Discount * V(next) is the n-step
//     target;
//   - IsDone = the IsDone of step t+k-1, as for a one-step transition;
//     it is Running for a transition truncated at the cursor.
//
// Stored discounts other than 0 count as 1: environments report 0 or 1,
// and the agent's discount is DiscountFactor. With Horizon 1 and
// DiscountFactor 1 the n-step transitions are the one-step ones.
//
// The same transitions exist as for one-step sampling (every non-boundary
// step whose successor is stored), so the cursor never hides data, the
// uniform sampling distribution and the export count do not depend on n,
// and a transition sampled near the cursor carries an exact k-step target
// (gamma^k tells the learner how far it looks). Excluding the newest n-1
// steps of each row instead would keep the freshest data from the learner
// and make the set of transitions depend on n.
//
// NStepOptions is a plain value (its Stack slice is only read), safe to
// share between goroutines.
type NStepOptions struct {
	// Horizon is n, at least 1.
	Horizon int
	// DiscountFactor is gamma, in [0, 1].
	DiscountFactor float64
	// Stack, when set, stacks observation fields over their last K
	// frames in the observation and the next observation (see
	// FrameStack); a bad request fails with ErrConfig, consuming nothing.
	Stack []FrameStack
}

func (o NStepOptions) validate() error {
	if o.Horizon < 1 {
		return fmt.Errorf("%w: n-step horizon %d < 1", ErrInvalidArg, o.Horizon)
	}
	if math.IsNaN(o.DiscountFactor) || o.DiscountFactor < 0 || o.DiscountFactor > 1 {
		return fmt.Errorf("%w: discount factor %v outside [0, 1]", ErrInvalidArg, o.DiscountFactor)
	}
	return nil
}

// NStepper is implemented by backends that sum n-step rewards in their
// own memory (one kernel launch for a batch). rew is the buffer's reward
// column (float32, [rows, capacity]), usually one column of the packed
// record arena (rew.Stride, rew.Offset); sum i goes to the float32 at
// byte offset outOff+4i of out. See cpu.Backend.NStepRewardColumn for the
// reference loop. A backend without it still serves n-step transitions: the rewards
// of every window are gathered (GatherWindows), downloaded and summed on
// the host with the same loop, then uploaded. Implementations must be
// safe for concurrent use as Backend's methods are.
type NStepper interface {
	NStepRewardColumn(rew Column, out Arena, outOff int64, wins []Window, capacity int64, gamma float64) error
}

var _ NStepper = (*cpu.Backend)(nil)

// nstepLen returns k for the transition at t of a row (see NStepOptions).
// The caller holds b.mu and t+1 is stored.
func (b *Buffer) nstepLen(row int, t int64, n int64) int64 {
	limit := min(n, b.cursor[row]-1-t)
	for j := int64(1); j <= limit; j++ {
		m := b.metaAt(row, t+j-1)
		if m&metaCut != 0 {
			return j - 1 // step t+j does not follow t+j-1; t itself has a successor, so j >= 2
		}
		if StepType((m&metaNextMask)>>metaNextShift) == Last {
			return j
		}
	}
	return limit
}

// SampleNStep samples n n-step transitions uniformly over every stored
// transition. See SampleNStepInto.
func (b *Buffer) SampleNStep(n int, opt NStepOptions) (*Transitions, error) {
	tr := new(Transitions)
	if err := b.SampleNStepInto(tr, n, opt); err != nil {
		return nil, err
	}
	return tr, nil
}

// SampleNStepInto samples n n-step transitions (see NStepOptions) into
// tr, reusing its memory (it allocates nothing in steady state); tensors
// are shaped as SampleTransitionsInto shapes them, stacked fields [n, K,
// ...shape] (see FrameStack). It fails with ErrInvalidArg for n below 1,
// bad options or a sample larger than the sample limit (see SampleBudget;
// the look-ahead counts min(Horizon, Capacity) steps of 4 bytes per
// transition, stacked frames their K-1 extra frames twice), ErrConfig for a
// bad opt.Stack (tr untouched), and ErrEmpty when the buffer holds no
// transition. It is safe for concurrent use with writers and
// other samplers; tr is not.
func (b *Buffer) SampleNStepInto(tr *Transitions, n int, opt NStepOptions) error {
	if n <= 0 || tr == nil {
		return fmt.Errorf("%w: sample of %d transitions", ErrInvalidArg, n)
	}
	if err := opt.validate(); err != nil {
		return err
	}
	if err := b.checkTransitionsSize("n-step sample", n, int64(opt.Horizon), 4); err != nil {
		return err
	}
	plan, err := b.stackPlan(opt.Stack, &tr.splan)
	if err != nil {
		return err
	}
	if err := b.stackSize("n-step sample", n, plan); err != nil {
		return err
	}
	tr.want = plan
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: SampleNStep", ErrClosed)
	}
	if err := b.drawTransitions(tr, n); err != nil {
		return err
	}
	if err := b.materialiseNStep(tr, opt); err != nil {
		return err
	}
	return tr.views(b.be, 0, n)
}

// AllNStepExperiences is AllExperiences with n-step transitions (see
// NStepOptions): the same transitions in the same order and layout, each
// looking up to Horizon steps ahead. With opt.Stack the fields it names
// are stacked (see FrameStack: [N, 1, K, ...shape] in ExportBatch mode)
// and the transitions whose stacks reach an overwritten step are left
// out; a bad opt.Stack fails with ErrConfig. It is safe for concurrent
// use.
func (b *Buffer) AllNStepExperiences(mode ExportMode, opt NStepOptions) ([]*Transitions, error) {
	if mode < ExportNone || mode > ExportSequence {
		return nil, fmt.Errorf("%w: export mode %d", ErrInvalidArg, mode)
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	plan, err := b.stackPlan(opt.Stack, nil)
	if err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, fmt.Errorf("%w: AllNStepExperiences", ErrClosed)
	}
	tr := new(Transitions)
	tr.want = plan
	tr.Rows, tr.Steps = b.allTransitions()
	if sk := stackMax(plan); sk > 1 {
		// Transitions whose stacks reach an overwritten step are none.
		j := 0
		for i, r := range tr.Rows {
			if b.stackKept(r, tr.Steps[i], sk) {
				tr.Rows[j], tr.Steps[j] = r, tr.Steps[i]
				j++
			}
		}
		tr.Rows, tr.Steps = tr.Rows[:j], tr.Steps[:j]
	}
	if len(tr.Rows) == 0 {
		return nil, fmt.Errorf("%w: the buffer holds no transition", ErrEmpty)
	}
	if err := b.materialiseNStep(tr, opt); err != nil {
		return nil, err
	}
	return b.exportViews(tr, mode)
}

// materialiseNStep gathers the n-step transitions at tr.Rows/tr.Steps into
// tr's arena. The caller holds b.mu.
func (b *Buffer) materialiseNStep(tr *Transitions, opt NStepOptions) error {
	h := int64(opt.Horizon)
	wins := grow(&tr.wins, len(tr.Rows))
	for i, r := range tr.Rows {
		t := tr.Steps[i]
		wins[i] = Window{Row: int64(r), Start: t, Len: b.nstepLen(r, t, h)}
	}
	return b.materialiseWindows(tr, opt.DiscountFactor)
}

// materialiseWindows gathers into tr's arena the transition of each
// window of tr.wins (Row and Start are tr.Rows and tr.Steps), looking
// Len steps ahead (see NStepOptions). A window of Len 0 is no transition
// (a table item that starts at a boundary step, say): it gets the fields
// of its start step as both observation and next observation, reward 0,
// discount 0 and IsDone Running. The caller holds b.mu.
func (b *Buffer) materialiseWindows(tr *Transitions, gamma float64) error {
	wins := tr.wins
	disc := grow(&tr.disc, len(wins))
	tr.idx, tr.next = tr.idx[:0], tr.next[:0]
	for _, w := range wins {
		r, t, k := int(w.Row), w.Start, w.Len
		tr.idx = append(tr.idx, b.slot(r, t))
		tr.next = append(tr.next, b.slot(r, t+k))
	}
	if err := b.materialise(tr); err != nil {
		return err
	}
	// materialise uploaded one-step IsDone values; replace them.
	for i, w := range wins {
		r, t, k := int(w.Row), w.Start, w.Len
		disc[i], tr.done[i] = 0, Running
		if k == 0 {
			continue
		}
		tr.done[i] = b.isDone(r, t+k-1)
		if tr.done[i] != Terminated {
			g := 1.0
			for range k {
				g = float64(g * gamma)
			}
			disc[i] = float32(g)
		}
	}
	k := int64(b.nUser + tr.nObs)
	arena := tr.out.arena
	rewOff, discOff, doneOff := tr.out.offs[k], tr.out.offs[k+1], tr.out.offs[k+2]
	if err := b.nstepRewards(arena, rewOff, wins, gamma); err != nil {
		return err
	}
	if err := b.be.Upload(arena, discOff, f32Raw(disc)); err != nil {
		return fmt.Errorf("%w: upload: %w", ErrBackend, err)
	}
	if err := b.be.Upload(arena, doneOff, tr.done); err != nil {
		return fmt.Errorf("%w: upload: %w", ErrBackend, err)
	}
	return nil
}

// nstepRewards writes the windows' discounted reward sums as float32 at
// byte offset off of out: by the backend's NStepper when it has one, else
// by gathering the rewards and summing them on the host.
func (b *Buffer) nstepRewards(out Arena, off int64, wins []Window, gamma float64) (err error) {
	rewCol := b.ring[b.nUser+colReward]
	if ns, ok := b.be.(NStepper); ok {
		if err := ns.NStepRewardColumn(rewCol, out, off, wins, b.capacity, gamma); err != nil {
			return fmt.Errorf("%w: n-step reward: %w", ErrBackend, err)
		}
		return nil
	}
	var l int64 = 1
	for _, w := range wins {
		l = max(l, w.Len)
	}
	n := int64(len(wins))
	scratch, err := b.be.Alloc(4 * n * l)
	if err != nil {
		return fmt.Errorf("%w: n-step scratch: %w", ErrBackend, err)
	}
	defer func() {
		if ferr := b.be.Free(scratch); ferr != nil && err == nil {
			err = fmt.Errorf("%w: freeing n-step scratch: %w", ErrBackend, ferr)
		}
	}()
	col := rewCol
	col.Out = scratch
	cols := []Column{col}
	if err := b.be.GatherWindows(cols, wins, l, b.capacity, nil, 0); err != nil {
		return fmt.Errorf("%w: gather rewards: %w", ErrBackend, err)
	}
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	rew := make([]float32, n*l)
	if err := b.be.Download(f32Raw(rew), scratch, 0); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	sums := make([]float32, n)
	for i, w := range wins {
		s, g := 0.0, 1.0
		for j := range w.Len {
			s = float64(s + float64(g*float64(rew[int64(i)*l+j])))
			g = float64(g * gamma)
		}
		sums[i] = float32(s)
	}
	if err := b.be.Upload(out, off, f32Raw(sums)); err != nil {
		return fmt.Errorf("%w: upload: %w", ErrBackend, err)
	}
	return nil
}

func f32Raw(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}
