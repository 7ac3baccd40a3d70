package envs

import (
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Field names of Noop.
const (
	NoopObservationName = "obs"    // float32, always 0
	NoopActionName      = "action" // int32 in [0, 1], ignored
)

// Noop is a batched environment that does nothing: its episodes never end
// (First after Reset, then Mid forever), rewards are 0, discounts 1 and
// the observation a constant 0. It checks the action tensor like any
// environment and flips between two time-step buffers, and exists to
// measure a driver's own overhead. It is not safe for concurrent use.
type Noop struct {
	b   buffers
	n   int
	obs []tensorbuf.Field
	act []tensorbuf.Field
}

// NewNoop returns a Noop environment of numEnvs rows (ErrConfig if < 1).
func NewNoop(numEnvs int) (*Noop, error) {
	if numEnvs < 1 {
		return nil, fmt.Errorf("%w: number of environments %d < 1", driver.ErrConfig, numEnvs)
	}
	e := &Noop{n: numEnvs, obs: noopObs, act: noopAct}
	var err error
	if e.b, err = newBuffers(e.obs, numEnvs); err != nil {
		return nil, err
	}
	return e, nil
}

// BatchSize returns the number of rows.
func (e *Noop) BatchSize() int { return e.n }

// ObservationSpec returns "obs", a scalar float32.
func (e *Noop) ObservationSpec() []tensorbuf.Field { return e.obs }

// ActionSpec returns "action", a scalar int32 in [0, 1].
func (e *Noop) ActionSpec() []tensorbuf.Field { return e.act }

// Current returns the latest time step, or nil before Reset.
func (e *Noop) Current() *driver.TimeStep { return e.b.current() }

// Reset returns First steps.
func (e *Noop) Reset() (*driver.TimeStep, error) {
	e.fill(e.b.next(), tensorbuf.First)
	return e.b.advance(), nil
}

// Step checks the action and returns Mid steps.
func (e *Noop) Step(action map[string]*tensor.Dense) (*driver.TimeStep, error) {
	if e.b.current() == nil {
		return nil, driver.ErrNotReset
	}
	if err := driver.CheckTensors(e.act, e.n, action); err != nil {
		return nil, fmt.Errorf("envs: noop step: %w", err)
	}
	e.fill(e.b.next(), tensorbuf.Mid)
	return e.b.advance(), nil
}

func (e *Noop) fill(ts *driver.TimeStep, st tensorbuf.StepType) {
	for r := range ts.StepType {
		ts.StepType[r], ts.Reward[r], ts.Discount[r] = st, 0, 1
	}
}

// NoopEnv is the single (unbatched) Noop, a driver.Env for measuring the
// overhead of driver.Parallel: Reset and Step only write the observation
// 0, and episodes never end. It is safe for concurrent use.
type NoopEnv struct{}

var noopObs = []tensorbuf.Field{{Name: NoopObservationName, Role: tensorbuf.Observation, DType: tensorbuf.Float32}}
var noopAct = []tensorbuf.Field{{Name: NoopActionName, Role: tensorbuf.Action, DType: tensorbuf.Int32, Min: []float64{0}, Max: []float64{1}}}

// ObservationSpec returns "obs", a scalar float32.
func (NoopEnv) ObservationSpec() []tensorbuf.Field { return noopObs }

// ActionSpec returns "action", a scalar int32 in [0, 1].
func (NoopEnv) ActionSpec() []tensorbuf.Field { return noopAct }

// Reset writes the observation 0.
func (NoopEnv) Reset(obs map[string]*tensor.Dense) error {
	obs[NoopObservationName].Float32s()[0] = 0
	return nil
}

// Step writes the observation 0 and returns reward 0, Running.
func (NoopEnv) Step(_, obs map[string]*tensor.Dense) (float32, driver.Status, error) {
	obs[NoopObservationName].Float32s()[0] = 0
	return 0, driver.Running, nil
}
