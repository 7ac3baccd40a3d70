package driver

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of these (test
// with errors.Is); errors from a driver run also wrap the underlying cause.
var (
	// ErrConfig reports an invalid driver or environment configuration.
	ErrConfig = errors.New("driver: invalid configuration")
	// ErrSpec reports a tensor or spec that does not match what is expected
	// (missing field, wrong dtype or shape, bad bounds).
	ErrSpec = errors.New("driver: spec mismatch")
	// ErrEnv marks a run stopped by an environment failure.
	ErrEnv = errors.New("driver: environment failed")
	// ErrPolicy marks a run stopped by a policy failure.
	ErrPolicy = errors.New("driver: policy failed")
	// ErrObserver marks a run stopped by an observer or transition
	// observer failure.
	ErrObserver = errors.New("driver: observer failed")
	// ErrNotReset reports a Step on an environment that was never reset, or
	// whose previous Step failed and left it needing a Reset.
	ErrNotReset = errors.New("driver: environment needs Reset")
	// ErrClosed reports use of a closed environment.
	ErrClosed = errors.New("driver: environment closed")
	// ErrInvalidArg reports an invalid argument to a call, such as a nil
	// context.
	ErrInvalidArg = errors.New("driver: invalid argument")
)

// RowError is an error that belongs to one row of a batch. Environments
// (Parallel, for example), policies and observers may return it, or wrap
// it, so that a driver can report the row. Errors are immutable once
// returned and safe for concurrent reads.
type RowError struct {
	Row int
	Err error
}

// Error returns "row R: cause".
func (e *RowError) Error() string { return fmt.Sprintf("row %d: %v", e.Row, e.Err) }

// Unwrap returns the row's error.
func (e *RowError) Unwrap() error { return e.Err }

// Stage names the part of a driver step that failed. It is a plain value,
// safe for concurrent use.
type Stage int

// The stages of a driver step, in the order they run.
const (
	StageReset Stage = iota // the environment's Reset at the start of a run
	StagePolicy
	StageEnv
	StageTransitionObserver
	StageObserver
	StageCanceled // the run's context was done
)

// String returns the stage's name.
func (s Stage) String() string {
	switch s {
	case StageReset:
		return "reset"
	case StagePolicy:
		return "policy"
	case StageEnv:
		return "environment step"
	case StageTransitionObserver:
		return "transition observer"
	case StageObserver:
		return "observer"
	case StageCanceled:
		return "canceled"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// StepError is the error a driver run returns when it stops early
// (immutable, safe for concurrent reads). It
// unwraps to the stage's sentinel (ErrEnv for StageReset and StageEnv,
// ErrPolicy, ErrObserver, or the context's error for StageCanceled) and
// to the underlying cause.
type StepError struct {
	Stage Stage
	// Iteration is the index, within this run, of the batched step that
	// failed (0 for the first step; 0 also for StageReset).
	Iteration int64
	// Row is the batch row the error came from, or -1 when unknown (taken
	// from a RowError in the cause's chain).
	Row int
	// Index is the position of the failing observer in its list, or -1.
	Index int
	Err   error
}

// Error describes the stage, iteration and row (when known) and the cause.
func (e *StepError) Error() string {
	where := ""
	if e.Index >= 0 {
		where = fmt.Sprintf(" %d", e.Index)
	}
	return fmt.Sprintf("driver: %v%s failed at iteration %d: %v", e.Stage, where, e.Iteration, e.Err)
}

// Unwrap returns the stage sentinel and the cause.
func (e *StepError) Unwrap() []error {
	switch e.Stage {
	case StageReset, StageEnv:
		return []error{ErrEnv, e.Err}
	case StagePolicy:
		return []error{ErrPolicy, e.Err}
	case StageTransitionObserver, StageObserver:
		return []error{ErrObserver, e.Err}
	}
	return []error{e.Err}
}

func stepError(stage Stage, iter int64, index int, err error) *StepError {
	row := -1
	var re *RowError
	if errors.As(err, &re) {
		row = re.Row
	}
	return &StepError{Stage: stage, Iteration: iter, Row: row, Index: index, Err: err}
}
