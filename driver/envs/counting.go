package envs

import (
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Observation and action field names of Counting.
const (
	CountName       = "count"        // int64: Step calls on this row since Reset
	EpisodeStepName = "episode_step" // int64: index of the step in its episode (0 on First)
	CountActionName = "action"       // int64 in [0, CountingMaxAction]
)

// CountingMaxAction is the upper bound of Counting's action.
const CountingMaxAction = 1000

// Counting is a deterministic batched environment for tests and
// documentation. Row r runs episodes of lengths[r] steps: after Reset its
// step types are First, Mid (lengths[r]-1 times), Last, then the boundary
// step back to First, and so on; with length 3: F M M L F M M L ...
//
// Its observation "count" is the number of Step calls on the row since
// Reset, so it equals the time index t (0, 1, 2, ...) and is different for
// every step of a row; "episode_step" is the step's index in its episode.
// The reward of a non-First step is the action taken, as float32 (0 after
// the boundary step, whose action is ignored); discount is 0 on Last
// (termination) and 1 otherwise.
//
// Counting double-buffers its time steps (see driver.Environment) and does
// not allocate in Step. It is not safe for concurrent use.
type Counting struct {
	lengths []int
	count   []int64
	epStep  []int64
	b       buffers
	obs     []tensorbuf.Field
	act     []tensorbuf.Field
}

// NewCounting returns a Counting environment with one row per length.
// Every length must be at least 1 (ErrConfig otherwise).
func NewCounting(lengths ...int) (*Counting, error) {
	if len(lengths) == 0 {
		return nil, fmt.Errorf("%w: counting environment needs at least one row", driver.ErrConfig)
	}
	for r, n := range lengths {
		if n < 1 {
			return nil, fmt.Errorf("%w: row %d: episode length %d < 1", driver.ErrConfig, r, n)
		}
	}
	c := &Counting{
		lengths: append([]int(nil), lengths...),
		count:   make([]int64, len(lengths)),
		epStep:  make([]int64, len(lengths)),
		obs: []tensorbuf.Field{
			{Name: CountName, Role: tensorbuf.Observation, DType: tensorbuf.Int64, Min: []float64{0}},
			{Name: EpisodeStepName, Role: tensorbuf.Observation, DType: tensorbuf.Int64, Min: []float64{0}},
		},
		act: []tensorbuf.Field{
			{Name: CountActionName, Role: tensorbuf.Action, DType: tensorbuf.Int64, Min: []float64{0}, Max: []float64{CountingMaxAction}},
		},
	}
	var err error
	if c.b, err = newBuffers(c.obs, len(lengths)); err != nil {
		return nil, err
	}
	return c, nil
}

// BatchSize returns the number of rows.
func (c *Counting) BatchSize() int { return len(c.lengths) }

// ObservationSpec returns "count" and "episode_step", scalar int64.
func (c *Counting) ObservationSpec() []tensorbuf.Field { return c.obs }

// ActionSpec returns "action", a scalar int64 in [0, CountingMaxAction].
func (c *Counting) ActionSpec() []tensorbuf.Field { return c.act }

// Current returns the latest time step, or nil before Reset.
func (c *Counting) Current() *driver.TimeStep { return c.b.current() }

// Reset starts every row at count 0 with a First step.
func (c *Counting) Reset() (*driver.TimeStep, error) {
	ts := c.b.next()
	for r := range c.lengths {
		c.count[r], c.epStep[r] = 0, 0
		ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.First, 0, 1
	}
	c.write(ts)
	return c.b.advance(), nil
}

// Step advances every row by one step. A missing or malformed action, or
// an action outside [0, CountingMaxAction] on a row that is not at a Last
// step, is refused (ErrSpec, with a driver.RowError for a bad value)
// before any row changes.
func (c *Counting) Step(action map[string]*tensor.Dense) (*driver.TimeStep, error) {
	prev := c.b.current()
	if prev == nil {
		return nil, driver.ErrNotReset
	}
	if err := driver.CheckTensors(c.act, len(c.lengths), action); err != nil {
		return nil, fmt.Errorf("envs: counting step: %w", err)
	}
	a := action[CountActionName].Int64s()
	for r, v := range a {
		if prev.StepType[r] != tensorbuf.Last && (v < 0 || v > CountingMaxAction) {
			return nil, fmt.Errorf("envs: counting step: %w", &driver.RowError{Row: r,
				Err: fmt.Errorf("%w: action %d outside [0, %d]", driver.ErrSpec, v, CountingMaxAction)})
		}
	}
	ts := c.b.next()
	for r, n := range c.lengths {
		c.count[r]++
		if prev.StepType[r] == tensorbuf.Last {
			c.epStep[r] = 0
			ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.First, 0, 1
			continue
		}
		c.epStep[r]++
		ts.Reward[r] = float32(a[r])
		if c.epStep[r] == int64(n) {
			ts.StepType[r], ts.Discount[r] = tensorbuf.Last, 0
		} else {
			ts.StepType[r], ts.Discount[r] = tensorbuf.Mid, 1
		}
	}
	c.write(ts)
	return c.b.advance(), nil
}

func (c *Counting) write(ts *driver.TimeStep) {
	copy(ts.Observation[CountName].Int64s(), c.count)
	copy(ts.Observation[EpisodeStepName].Int64s(), c.epStep)
}
