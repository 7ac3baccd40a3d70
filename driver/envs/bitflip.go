package envs

import (
	"fmt"
	"math/rand/v2"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Field names of BitFlip.
const (
	BitFlipStateName  = "bits" // float32 [n]: the current bits, the achieved goal
	BitFlipGoalName   = "goal" // float32 [n]: the target bits, the desired goal
	BitFlipActionName = "flip" // int64 in [0, n-1]: the bit to flip
)

// BitFlip is the bit-flipping goal environment of the hindsight experience
// replay paper (Andrychowicz et al., 2017): the state is n bits, the goal
// another n bits, both drawn uniformly at random at the start of each
// episode, and each action flips one bit. The reward follows the paper:
// 0 when the bits equal the goal after the step and -1 otherwise. Reaching
// the goal terminates the episode (Last, discount 0); otherwise the n-th
// step ends it at the time limit (Last, discount 1: a truncation), as SB3's
// BitFlippingEnv does with its default of n steps. With n = 15 a random
// policy almost never reaches the goal, which is what makes the task a
// test of relabeling.
//
// It follows driver.Environment's auto-reset convention: the step after a
// Last step is the First step of a new episode, with reward 0, discount 1,
// and the action ignored. Each row draws from its own PCG stream seeded by
// the seed and the row index. BitFlip double-buffers its time steps and
// does not allocate in Step. It is not safe for concurrent use.
type BitFlip struct {
	n     int
	bits  []float32 // [rows*n]
	goal  []float32 // [rows*n]
	steps []int     // steps taken in the current episode, per row
	rngs  []*rand.Rand
	b     buffers
	obs   []tensorbuf.Field
	act   []tensorbuf.Field
}

// NewBitFlip returns numEnvs bit-flipping environments of n bits each.
// numEnvs and n must be at least 1 (ErrConfig otherwise).
func NewBitFlip(numEnvs, n int, seed uint64) (*BitFlip, error) {
	if numEnvs < 1 || n < 1 {
		return nil, fmt.Errorf("%w: bit flip with %d rows of %d bits", driver.ErrConfig, numEnvs, n)
	}
	e := &BitFlip{
		n:     n,
		bits:  make([]float32, numEnvs*n),
		goal:  make([]float32, numEnvs*n),
		steps: make([]int, numEnvs),
		rngs:  make([]*rand.Rand, numEnvs),
		obs: []tensorbuf.Field{
			{Name: BitFlipStateName, Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{n}, Min: []float64{0}, Max: []float64{1}},
			{Name: BitFlipGoalName, Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{n}, Min: []float64{0}, Max: []float64{1}},
		},
		act: []tensorbuf.Field{
			{Name: BitFlipActionName, Role: tensorbuf.Action, DType: tensorbuf.Int64, Min: []float64{0}, Max: []float64{float64(n - 1)}},
		},
	}
	for r := range e.rngs {
		e.rngs[r] = rand.New(rand.NewPCG(seed, 0x626974666c6970^uint64(r))) // "bitflip"
	}
	var err error
	if e.b, err = newBuffers(e.obs, numEnvs); err != nil {
		return nil, err
	}
	return e, nil
}

// Bits returns the number of bits n.
func (e *BitFlip) Bits() int { return e.n }

// BatchSize returns the number of rows.
func (e *BitFlip) BatchSize() int { return len(e.steps) }

// ObservationSpec returns "bits" and "goal", float32 [n] of 0s and 1s.
func (e *BitFlip) ObservationSpec() []tensorbuf.Field { return e.obs }

// ActionSpec returns "flip", a scalar int64 in [0, n-1].
func (e *BitFlip) ActionSpec() []tensorbuf.Field { return e.act }

// Current returns the latest time step, or nil before Reset.
func (e *BitFlip) Current() *driver.TimeStep { return e.b.current() }

// Reset starts a new episode on every row.
func (e *BitFlip) Reset() (*driver.TimeStep, error) {
	ts := e.b.next()
	for r := range e.steps {
		e.newEpisode(r)
		ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.First, 0, 1
	}
	e.write(ts)
	return e.b.advance(), nil
}

func (e *BitFlip) newEpisode(r int) {
	e.steps[r] = 0
	rng := e.rngs[r]
	for i := r * e.n; i < (r+1)*e.n; i++ {
		e.bits[i] = float32(rng.IntN(2))
		e.goal[i] = float32(rng.IntN(2))
	}
}

// Step flips the chosen bit of every row. A missing or malformed action,
// or a bit index outside [0, n-1] on a row that is not at a Last step, is
// refused (ErrSpec, with a driver.RowError for a bad value) before any row
// changes.
func (e *BitFlip) Step(action map[string]*tensor.Dense) (*driver.TimeStep, error) {
	prev := e.b.current()
	if prev == nil {
		return nil, driver.ErrNotReset
	}
	if err := driver.CheckTensors(e.act, len(e.steps), action); err != nil {
		return nil, fmt.Errorf("envs: bit flip step: %w", err)
	}
	a := action[BitFlipActionName].Int64s()
	for r, v := range a {
		if prev.StepType[r] != tensorbuf.Last && (v < 0 || v >= int64(e.n)) {
			return nil, fmt.Errorf("envs: bit flip step: %w", &driver.RowError{Row: r,
				Err: fmt.Errorf("%w: bit %d outside [0, %d]", driver.ErrSpec, v, e.n-1)})
		}
	}
	ts := e.b.next()
	for r := range e.steps {
		if prev.StepType[r] == tensorbuf.Last {
			e.newEpisode(r)
			ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.First, 0, 1
			continue
		}
		i := r*e.n + int(a[r])
		e.bits[i] = 1 - e.bits[i]
		e.steps[r]++
		reached := equal(e.bits[r*e.n:(r+1)*e.n], e.goal[r*e.n:(r+1)*e.n])
		switch {
		case reached:
			ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.Last, 0, 0
		case e.steps[r] >= e.n:
			ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.Last, -1, 1
		default:
			ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.Mid, -1, 1
		}
	}
	e.write(ts)
	return e.b.advance(), nil
}

func (e *BitFlip) write(ts *driver.TimeStep) {
	copy(ts.Observation[BitFlipStateName].Float32s(), e.bits)
	copy(ts.Observation[BitFlipGoalName].Float32s(), e.goal)
}

func equal[T float32 | float64](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BitFlipReward is BitFlip's reward as a function of the achieved and the
// desired goal, for tensorbuf.HindsightConfig: 0 when they are equal, -1
// otherwise. It is safe for concurrent use.
func BitFlipReward(achieved, desired []float64) float32 {
	if equal(achieved, desired) {
		return 0
	}
	return -1
}

// BitFlipDone is BitFlip's termination as a function of the achieved and
// the desired goal, for tensorbuf.HindsightConfig: true when they are
// equal. It is safe for concurrent use.
func BitFlipDone(achieved, desired []float64) bool { return equal(achieved, desired) }

var _ driver.Environment = (*BitFlip)(nil)
