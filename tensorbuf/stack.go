package tensorbuf

import (
	"fmt"
	"slices"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
)

// FrameStack asks a sampler for an observation field stacked over its
// last K frames, as pixel agents (DQN, Rainbow and their successors on
// Atari) see their inputs, while the ring stores each frame once. Pass
// it in NStepOptions.Stack: Buffer.SampleNStepInto (Horizon 1 and
// DiscountFactor 1 give one-step transitions), Buffer.AllNStepExperiences
// and Table.SampleTransitionsInto honour it; sequence samples take it in
// SequenceOptions.Stack (Buffer.SampleSequencesInto) and
// Table.SampleStackedInto, every step of a window stacked as the
// observation of the transition at that step (see SequenceOptions).
//
// The transition at step t of a row then holds, for the field:
//
//   - Observation[Field], shaped [n, K, ...shape]: the frames of steps
//     t-K+1 .. t, oldest first (K-1 is step t itself; the stack axis comes
//     first, the layout of PyTorch's NCHW convolutions and of Gymnasium's
//     FrameStackObservation);
//   - NextObservation[Field], the same K frames ending at the step the
//     transition bootstraps from (t+1 for a one-step transition, t+k for
//     an n-step one): for a truncated episode that is its true final
//     frame, the observation of its last step, never the first frame of
//     the next episode (the error of CleanRL issue 460).
//
// A frame before the episode's first step is zeros, as in SB3's
// VecFrameStack (which zeroes the stack at reset) and Dopamine's replay
// buffer (which stores K-1 zero frames before every episode); Gymnasium's
// FrameStackObservation with its default padding_type="reset" would
// repeat the first frame instead. "Before the episode" means: a later one
// of the K steps is a First step, or the frame's step is before a cut
// (see Writer.MarkCut: its successor does not continue it) or before the
// row's first step. K is at most the row capacity.
//
// A cut's mark is kept with the step before it, so once the ring has
// overwritten that step a stack that walks back to the row's oldest step
// without meeting a First step counts as reaching an overwritten step,
// even if the lost step was cut (its frame would have been zeros): the
// ring can no longer tell.
//
// A transition whose stack reaches a step the ring has already
// overwritten is never sampled by the direct samplers nor exported (as
// Dopamine's replay skips indices whose stack straddles its cursor): the
// set of transitions, and so the uniform distribution and the export
// count, then depend on K near each row's oldest step, and only there. A
// table's item is kept by the table while its first step is stored; an
// item drawn whose stack reaches an overwritten step comes with Valid
// false (and a masked weight of 0), its lost frames zeros.
//
// Memory: nothing extra is stored, whatever K. A buffer of Atari frames
// (84x84 uint8) with an int32 action takes 7,077 bytes per stored step
// (7,056 of frame, 20 of packed record, 1 of host metadata;
// TestFrameStackMemory), so 1M transitions (a million steps plus one
// boundary step per episode) hold in 7.08 GB, against 56.4 GB for the
// observation and next observation stored stacked (2 x 4 x 7,056 bytes
// each).
//
// FrameStack is a plain value, safe to share between goroutines.
type FrameStack struct {
	// Field names an observation field of the buffer.
	Field string
	// K is the number of frames per stacked observation, 1 to the row
	// capacity.
	K int
}

// FrameStacker is implemented by backends that build the stacked frames
// of a DeviceSelection table's transitions in their own memory
// (kernels/stack_gather.cu): the episode edges of each drawn item are
// found in the table's mirror of the per-step metadata, so the sample
// stays on the backend with no host copy. The cpu and gpu backends
// implement it (cpu.Backend.StackGather is the reference loop); a
// TransitionSelector without it serves stacked table transitions by
// selecting on the host. Implementations must be safe for concurrent use
// on distinct outputs.
type FrameStacker interface {
	StackGather(g kernels.FrameStackGather) error
}

var _ FrameStacker = (*cpu.Backend)(nil)

// stackPlan checks a request for stacked fields and returns the K of
// every user field (0: not stacked), or nil when nothing is stacked. A
// bad request fails with ErrConfig: an unknown field (ErrUnknownField
// too), a field that is not an observation, a field named twice, K below
// 1 or above the row capacity. Every dtype and shape stacks (a leading
// axis of K is added); the sample's size is checked by stackSize.
// The plan is built in *dst (nil: new memory), so that a sampler reusing
// its Transitions allocates nothing.
func (b *Buffer) stackPlan(st []FrameStack, dst *[]int) ([]int, error) {
	if len(st) == 0 {
		return nil, nil
	}
	var plan []int
	if dst != nil {
		plan = grow(dst, b.nUser)
		clear(plan)
	} else {
		plan = make([]int, b.nUser)
	}
	for _, s := range st {
		i, ok := b.byName[s.Field]
		switch {
		case !ok || i >= b.nUser:
			return nil, fmt.Errorf("%w: %w: frame stack of %q: not a field of the buffer", ErrConfig, ErrUnknownField, s.Field)
		case b.cols[i].Role != Observation:
			return nil, fmt.Errorf("%w: frame stack of %q: a %s field, not an observation", ErrConfig, s.Field, b.cols[i].Role)
		case plan[i] != 0:
			return nil, fmt.Errorf("%w: frame stack of %q asked twice", ErrConfig, s.Field)
		case s.K < 1 || int64(s.K) > b.capacity:
			return nil, fmt.Errorf("%w: frame stack of %q: K %d outside [1, %d] (the row capacity)", ErrConfig, s.Field, s.K, b.capacity)
		}
		plan[i] = s.K
	}
	return plan, nil
}

// stackSize refuses, as checkTransitionsSize does, a sample of n
// transitions whose stacked frames exceed the sample limit.
func (b *Buffer) stackSize(what string, n int, plan []int) error {
	if plan == nil {
		return nil
	}
	all, obs := b.stepBytes()
	per := all + obs + 1
	for i, k := range plan {
		if k > 1 {
			extra, ok := kernels.Mul(int64(2*(k-1)), b.cols[i].stepBytes)
			if !ok || per > 1<<62-extra {
				per = 1 << 62
				break
			}
			per += extra
		}
	}
	return b.checkSampleSize(what, " with stacked frames", int64(n), 1, per)
}

// stackMax returns the largest K of a plan (1 without stacking).
func stackMax(plan []int) int64 {
	m := 1
	for _, k := range plan {
		m = max(m, k)
	}
	return int64(m)
}

// stackReal returns how many of the k frames ending at step t of a row
// are real (the others, before them, zeros) and whether the walk back
// reached a step the ring has overwritten (see FrameStack): the host's
// twin of the kernels' tr_stack_real. The caller holds b.mu.
func (b *Buffer) stackReal(row int, t, k int64) (real int64, lost bool) {
	if k <= 1 {
		return 1, false
	}
	base := int64(row) * b.capacity
	return cpu.StackReal(b.meta[base:base+b.capacity], b.cursor[row], b.capacity, t%b.capacity, k)
}

// stackKept reports whether the transition at step t of a row keeps every
// frame its stacks need: false when they reach an overwritten step. The
// caller holds b.mu.
func (b *Buffer) stackKept(row int, t, k int64) bool {
	if k <= 1 {
		return true
	}
	_, lost := b.stackReal(row, t, k)
	return !lost
}

// applyStack makes tr's layout follow the plan its sampler asked for
// (tr.want: the K of each user field, nil for none), dropping its memory
// when the layout changes. reserve calls it, once the call can no longer
// fail before it writes tr, so that a failed call leaves tr as it was.
func (tr *Transitions) applyStack() error {
	if slices.Equal(tr.want, tr.stack) && (tr.want == nil) == (tr.stack == nil) {
		return nil
	}
	var err error
	if tr.out != nil && !tr.shared {
		err = tr.out.replace()
	}
	tr.out, tr.shared, tr.specs, tr.shape, tr.first = nil, false, nil, nil, 0
	tr.stack = slices.Clone(tr.want)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBackend, err)
	}
	return nil
}

// stackedSpec returns the output spec of user column i under tr's plan.
func (tr *Transitions) stackedSpec(c *column, i int) outSpec {
	s := outSpec{name: c.Name, dtype: c.DType, shape: c.Shape, stepBytes: c.stepBytes}
	if tr.stack != nil && tr.stack[i] > 0 {
		k := tr.stack[i]
		s.shape = append([]int{k}, c.Shape...)
		s.stepBytes = int64(k) * c.stepBytes
	}
	return s
}

// stacked reports whether user column i is stacked in tr.
func (tr *Transitions) stacked(i int) bool {
	return tr.stack != nil && i < len(tr.stack) && tr.stack[i] > 0
}

// gatherStacks writes the stacked observation and next observation of
// every stacked field of tr: one window gather of n*K one-step windows
// each (a frame before the episode is a window of no real step: zeros).
// The next step of transition i is tr.wins[i].Start+tr.wins[i].Len. It
// sets tr.lost[i] when transition i's frames reach an overwritten step.
// The caller holds b.mu.
func (b *Buffer) gatherStacks(tr *Transitions) error {
	n := len(tr.Rows)
	lost := grow(&tr.lost, n)
	clear(lost)
	if tr.stack == nil {
		return nil
	}
	nextSpec := b.nUser
	for i := range b.nUser {
		if b.cols[i].Role != Observation {
			continue
		}
		ns := nextSpec
		nextSpec++
		k := int64(tr.stack[i])
		if k == 0 {
			continue
		}
		wins := grow(&tr.swins, n*int(k))
		for pass := range 2 {
			off := tr.out.offs[i]
			if pass == 1 {
				off = tr.out.offs[ns]
			}
			for j, r := range tr.Rows {
				t := tr.Steps[j]
				if pass == 1 {
					t = tr.wins[j].Start + tr.wins[j].Len
				}
				real, l := b.stackReal(r, t, k)
				if pass == 0 && l {
					lost[j] = true
				}
				for f := range k {
					w := Window{Row: int64(r), Start: t, Len: 0}
					if f >= k-real {
						w.Start, w.Len = t-(k-1-f), 1
					}
					wins[int64(j)*k+f] = w
				}
			}
			cols := grow(&tr.scols, 1)
			cols[0] = b.ring[i]
			cols[0].Out, cols[0].OutOff = tr.out.arena, off
			if err := b.be.GatherWindows(cols, wins, 1, b.capacity, nil, 0); err != nil {
				return fmt.Errorf("%w: frame-stack gather: %w", ErrBackend, err)
			}
		}
	}
	return nil
}
