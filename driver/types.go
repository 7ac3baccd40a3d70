package driver

import (
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TimeStep holds all rows of a batched environment at one time. Slices have
// length B (the batch size) and every observation tensor has shape
// [B, ...field shape] (just [B] for a scalar field).
//
// A TimeStep returned by an Environment is owned by that environment: the
// built-in environments and Parallel double-buffer, so a TimeStep stays
// valid until the second following call to Step or Reset. Keep a copy
// (Clone or CopyFrom) of anything needed for longer. A TimeStep is not safe
// for concurrent mutation; concurrent reads are fine.
type TimeStep struct {
	StepType    []tensorbuf.StepType     // [B]
	Reward      []float32                // [B]; 0 on First steps
	Discount    []float32                // [B]; 0 on a Last step that terminates, 1 otherwise
	Observation map[string]*tensor.Dense // name -> [B, ...shape]
}

// BatchSize returns the number of rows of ts.
func (ts *TimeStep) BatchSize() int { return len(ts.StepType) }

// Clone returns a deep copy of ts that shares no memory with it.
func (ts *TimeStep) Clone() *TimeStep {
	c := &TimeStep{
		StepType:    append([]tensorbuf.StepType(nil), ts.StepType...),
		Reward:      append([]float32(nil), ts.Reward...),
		Discount:    append([]float32(nil), ts.Discount...),
		Observation: cloneTensors(ts.Observation),
	}
	return c
}

// PolicyStep is what a policy returns for a TimeStep: actions for every row,
// optional policy info, and the policy state to pass to the next call.
// Tensors have shape [B, ...field shape]. A PolicyStep may be reused by its
// policy: it stays valid until the policy's next Action call. Like
// TimeStep it is plain data: concurrent reads are safe, mutation is not.
type PolicyStep struct {
	Action map[string]*tensor.Dense // [B, ...]
	Info   map[string]*tensor.Dense // policy info, [B, ...]; may be nil or empty
	State  any
}

// Trajectory is one batched TF-Agents trajectory step: the observation,
// action and policy info at time t with the step type at t, and the next
// step type, reward and discount from t+1. A trajectory whose StepType is
// Last (and NextStepType First) is a boundary: the auto-reset step between
// two episodes, whose action was ignored by the environment.
//
// Drivers reuse one Trajectory and alias the environment's and policy's
// memory: a Trajectory passed to Observe is valid only during that call.
// Observers must copy (Clone) what they keep. Concurrent reads are safe,
// mutation is not.
type Trajectory struct {
	StepType, NextStepType []tensorbuf.StepType
	Observation            map[string]*tensor.Dense
	Action                 map[string]*tensor.Dense
	PolicyInfo             map[string]*tensor.Dense
	Reward, Discount       []float32

	// Active is nil unless a driver runs in per-row (unbiased) episode
	// mode; then it has length B and rows where it is false carry data
	// that is not part of the collection (a row waiting for its first
	// episode to start, or one that has finished its episodes): observers
	// must ignore those rows entirely and keep their per-row state as it
	// is, as if the step had not happened for that row.
	Active []bool
}

// BatchSize returns the number of rows of t.
func (t *Trajectory) BatchSize() int { return len(t.StepType) }

// IsActive reports whether row r of t is part of the collection (always
// true when Active is nil).
func (t *Trajectory) IsActive(r int) bool { return t.Active == nil || t.Active[r] }

// IsBoundary reports whether row r of t is a boundary step (StepType Last).
func (t *Trajectory) IsBoundary(r int) bool { return t.StepType[r] == tensorbuf.Last }

// Clone returns a deep copy of t that shares no memory with it.
func (t *Trajectory) Clone() *Trajectory {
	c := &Trajectory{
		StepType:     append([]tensorbuf.StepType(nil), t.StepType...),
		NextStepType: append([]tensorbuf.StepType(nil), t.NextStepType...),
		Observation:  cloneTensors(t.Observation),
		Action:       cloneTensors(t.Action),
		PolicyInfo:   cloneTensors(t.PolicyInfo),
		Reward:       append([]float32(nil), t.Reward...),
		Discount:     append([]float32(nil), t.Discount...),
	}
	if t.Active != nil {
		c.Active = append([]bool(nil), t.Active...)
	}
	return c
}

// Environment is a batched environment of B rows with auto-reset: the
// step after a row's Last step returns First of the row's next episode,
// with reward 0 and discount 1, and ignores that row's action. The
// transition Last -> First is the boundary trajectory.
//
// Step takes one tensor per action field, shaped [B, ...field shape].
// Reset and Step return a TimeStep owned by the environment that must stay
// valid and unchanged until the second following call to Step or Reset
// (drivers hold the current and the next time step at once; two buffers
// used in turn are enough). Current returns the latest one, or nil before
// the first Reset. After a failed Step an environment may require
// Reset. Implementations need not be safe for concurrent use.
type Environment interface {
	BatchSize() int
	ObservationSpec() []tensorbuf.Field
	ActionSpec() []tensorbuf.Field
	Reset() (*TimeStep, error)
	Step(action map[string]*tensor.Dense) (*TimeStep, error)
	Current() *TimeStep
}

// Policy maps a batched TimeStep and a policy state to actions, policy
// info (described by InfoSpec, may be empty) and a new state. InitialState
// gives the state to start from for a batch size (nil for a stateless
// policy). Implementations need not be safe for concurrent use.
type Policy interface {
	InitialState(batchSize int) any
	Action(ts *TimeStep, state any) (*PolicyStep, error)
	InfoSpec() []tensorbuf.Field
}

// Observer receives every batched trajectory a driver collects. The
// trajectory is only valid during the call (see Trajectory). A driver calls
// its observers from the goroutine running Run, one call at a time, so an
// observer used by one driver need not be safe for concurrent use; one
// shared by drivers running at once must be.
type Observer interface {
	Observe(traj *Trajectory) error
}

// TransitionObserver receives (time step, policy step, next time step) for
// every batched step a driver takes, before the Observers see the
// trajectory built from the same step. The arguments are only valid
// during the call. Calls come one at a time, as for Observer.
type TransitionObserver interface {
	ObserveTransition(ts *TimeStep, ps *PolicyStep, next *TimeStep) error
}

// ObserverFunc adapts a function to an Observer; it is as safe for
// concurrent use as the function.
type ObserverFunc func(traj *Trajectory) error

// Observe calls f(traj).
func (f ObserverFunc) Observe(traj *Trajectory) error { return f(traj) }

// TransitionObserverFunc adapts a function to a TransitionObserver; it is
// as safe for concurrent use as the function.
type TransitionObserverFunc func(ts *TimeStep, ps *PolicyStep, next *TimeStep) error

// ObserveTransition calls f(ts, ps, next).
func (f TransitionObserverFunc) ObserveTransition(ts *TimeStep, ps *PolicyStep, next *TimeStep) error {
	return f(ts, ps, next)
}

func cloneTensors(m map[string]*tensor.Dense) map[string]*tensor.Dense {
	if m == nil {
		return nil
	}
	c := make(map[string]*tensor.Dense, len(m))
	for k, v := range m {
		c[k] = cloneDense(v)
	}
	return c
}

// cloneDense copies a host tensor's elements into a new tensor of the same
// dtype and shape.
func cloneDense(d *tensor.Dense) *tensor.Dense {
	if d == nil {
		return nil
	}
	shape := append([]int(nil), d.Shape()...)
	c := tensor.New(tensor.Of(d.Dtype()), tensor.WithShape(shape...))
	copy(c.Raw, d.Raw)
	return c
}
