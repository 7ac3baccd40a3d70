package driver

import (
	"context"
	"fmt"
	"reflect"

	"github.com/trajring/trajring/tensorbuf"
)

// Option configures a StepDriver or an EpisodeDriver. Options are
// functions without shared state, safe for concurrent use.
type Option func(*config) error

type config struct {
	observers   []Observer
	transitions []TransitionObserver
	maxIter     int64
	perRow      bool
}

// WithObservers appends observers; each receives every trajectory, in the
// order given.
func WithObservers(obs ...Observer) Option {
	return func(c *config) error {
		for i, o := range obs {
			if isNil(o) {
				return fmt.Errorf("%w: observer %d is nil", ErrConfig, len(c.observers)+i)
			}
		}
		c.observers = append(c.observers, obs...)
		return nil
	}
}

// WithTransitionObservers appends transition observers; they are called for
// each step, in the order given, before the observers.
func WithTransitionObservers(obs ...TransitionObserver) Option {
	return func(c *config) error {
		for i, o := range obs {
			if isNil(o) {
				return fmt.Errorf("%w: transition observer %d is nil", ErrConfig, len(c.transitions)+i)
			}
		}
		c.transitions = append(c.transitions, obs...)
		return nil
	}
}

// WithMaxIterations bounds the number of batched environment steps of each
// run (TF-Agents' maximum_iterations); 0, the default, means no bound.
func WithMaxIterations(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: maximum iterations %d < 0", ErrConfig, n)
		}
		c.maxIter = int64(n)
		return nil
	}
}

// EpisodesPerRow makes an EpisodeDriver collect exactly numEpisodes complete
// episodes from every row (the unbiased mode; see the package
// documentation). A StepDriver refuses it.
func EpisodesPerRow() Option {
	return func(c *config) error { c.perRow = true; return nil }
}

// RunStats counts what one run collected (a plain value).
type RunStats struct {
	// Iterations is the number of batched environment steps taken.
	Iterations int64
	// Steps is the number of non-boundary trajectories observed, summed
	// over rows (in per-row mode: over active rows only).
	Steps int64
	// Episodes is the number of boundary trajectories observed, summed over
	// rows (in per-row mode: over active rows only), that is the number of
	// episodes that ended.
	Episodes int64
}

var errNilContext = fmt.Errorf("%w: nil context (use context.Background())", ErrInvalidArg)

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func or channel, such as (*envs.CartPole)(nil): calling a
// method on one panics, so constructors refuse it.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// loop is the part shared by both drivers: one batched step at a time.
type loop struct {
	env    Environment
	policy Policy
	config
	batch int
	traj  Trajectory
	stats RunStats
}

func newLoop(env Environment, policy Policy, opts []Option) (*loop, error) {
	if isNil(env) || isNil(policy) {
		return nil, fmt.Errorf("%w: nil environment or policy", ErrConfig)
	}
	l := &loop{env: env, policy: policy, batch: env.BatchSize()}
	if l.batch <= 0 {
		return nil, fmt.Errorf("%w: environment batch size %d", ErrConfig, l.batch)
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&l.config); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// start resets the environment when ts is nil and asks the policy for its
// initial state when state is nil.
func (l *loop) start(ts *TimeStep, state any) (*TimeStep, any, error) {
	l.stats = RunStats{}
	if ts == nil {
		var err error
		if ts, err = l.env.Reset(); err != nil {
			return nil, state, stepError(StageReset, 0, -1, err)
		}
		if err := l.checkTimeStep(ts); err != nil {
			return nil, state, stepError(StageReset, 0, -1, err)
		}
	} else if err := l.checkTimeStep(ts); err != nil {
		return ts, state, fmt.Errorf("driver: run given a bad time step: %w", err)
	}
	if state == nil {
		state = l.policy.InitialState(l.batch)
	}
	return ts, state, nil
}

func (l *loop) checkTimeStep(ts *TimeStep) error {
	if ts == nil {
		return fmt.Errorf("%w: nil time step", ErrSpec)
	}
	if len(ts.StepType) != l.batch || len(ts.Reward) != l.batch || len(ts.Discount) != l.batch {
		return fmt.Errorf("%w: time step has %d step types, %d rewards, %d discounts for batch size %d",
			ErrSpec, len(ts.StepType), len(ts.Reward), len(ts.Discount), l.batch)
	}
	return nil
}

// step takes one batched step from ts with state, calls the observers, and
// returns the next time step and policy state. On failure it returns the
// error with ts and state unchanged, except after an observer failure,
// where the environment has moved on and the new time step and state are
// returned with the error.
func (l *loop) step(ctx context.Context, ts *TimeStep, state any, active []bool) (*TimeStep, any, error) {
	iter := l.stats.Iterations
	select {
	case <-ctx.Done():
		return ts, state, stepError(StageCanceled, iter, -1, ctx.Err())
	default:
	}
	ps, err := l.policy.Action(ts, state)
	if err == nil && ps == nil {
		err = fmt.Errorf("%w: policy returned a nil policy step", ErrSpec)
	}
	if err != nil {
		return ts, state, stepError(StagePolicy, iter, -1, err)
	}
	next, err := l.env.Step(ps.Action)
	if err == nil {
		err = l.checkTimeStep(next)
	}
	if err != nil {
		return ts, state, stepError(StageEnv, iter, -1, err)
	}
	l.stats.Iterations++
	t := &l.traj
	t.StepType = ts.StepType
	t.NextStepType = next.StepType
	t.Observation = ts.Observation
	t.Action = ps.Action
	t.PolicyInfo = ps.Info
	t.Reward = next.Reward
	t.Discount = next.Discount
	t.Active = active
	for i, o := range l.transitions {
		if err := o.ObserveTransition(ts, ps, next); err != nil {
			return next, ps.State, stepError(StageTransitionObserver, iter, i, err)
		}
	}
	for i, o := range l.observers {
		if err := o.Observe(t); err != nil {
			return next, ps.State, stepError(StageObserver, iter, i, err)
		}
	}
	for r, st := range ts.StepType {
		if active != nil && !active[r] {
			continue
		}
		if st == tensorbuf.Last {
			l.stats.Episodes++
		} else {
			l.stats.Steps++
		}
	}
	return next, ps.State, nil
}

func (l *loop) setMaxIterations(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: maximum iterations %d < 0", ErrConfig, n)
	}
	l.maxIter = int64(n)
	return nil
}

func (l *loop) more() bool { return l.maxIter == 0 || l.stats.Iterations < l.maxIter }

// StepDriver steps a batched environment with a policy until a number of
// non-boundary steps, summed over rows, has been collected (TF-Agents'
// DynamicStepDriver). A StepDriver is not safe for concurrent use.
type StepDriver struct {
	l        *loop
	numSteps int64
}

// NewStepDriver returns a driver whose runs collect at least numSteps
// non-boundary steps summed over the environment's rows. numSteps must be
// positive. EpisodesPerRow is refused with ErrConfig.
func NewStepDriver(env Environment, policy Policy, numSteps int, opts ...Option) (*StepDriver, error) {
	l, err := newLoop(env, policy, opts)
	if err != nil {
		return nil, err
	}
	if numSteps <= 0 {
		return nil, fmt.Errorf("%w: number of steps %d <= 0", ErrConfig, numSteps)
	}
	if l.perRow {
		return nil, fmt.Errorf("%w: EpisodesPerRow applies to episode drivers only", ErrConfig)
	}
	return &StepDriver{l: l, numSteps: int64(numSteps)}, nil
}

// Run takes batched steps until the count of non-boundary trajectories,
// summed over rows, reaches the driver's number of steps (it stops as soon
// as the count is >= the target, so it may overshoot by up to B-1, and never
// undershoots) or the maximum number of iterations is reached.
//
// With ts == nil Run resets the environment; with state == nil it asks the
// policy for its initial state. Passing the time step and state returned by
// the previous Run continues exactly where that run stopped. Run returns
// the final time step (owned by the environment) and policy state. On
// error it returns a *StepError together with the latest time step and
// state (see StepError); a canceled ctx stops the run between steps. A nil
// ctx is refused with ErrInvalidArg before anything runs.
func (d *StepDriver) Run(ctx context.Context, ts *TimeStep, state any) (*TimeStep, any, error) {
	if ctx == nil {
		return ts, state, errNilContext
	}
	l := d.l
	ts, state, err := l.start(ts, state)
	if err != nil {
		return ts, state, err
	}
	for l.stats.Steps < d.numSteps && l.more() {
		if ts, state, err = l.step(ctx, ts, state, nil); err != nil {
			return ts, state, err
		}
	}
	return ts, state, nil
}

// Stats returns the counts of the latest run.
func (d *StepDriver) Stats() RunStats { return d.l.stats }

// SetNumSteps sets the number of steps of the following runs (> 0), like
// the num_steps argument of TF-Agents' run. A bad value returns ErrConfig
// and changes nothing.
func (d *StepDriver) SetNumSteps(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: number of steps %d <= 0", ErrConfig, n)
	}
	d.numSteps = int64(n)
	return nil
}

// SetMaxIterations sets the maximum iterations of the following runs (0:
// no bound). A negative value returns ErrConfig and changes nothing.
func (d *StepDriver) SetMaxIterations(n int) error { return d.l.setMaxIterations(n) }

// EpisodeDriver steps a batched environment with a policy until a number of
// episodes has ended (TF-Agents' DynamicEpisodeDriver), or, with
// EpisodesPerRow, until every row has completed that many episodes. An
// EpisodeDriver is not safe for concurrent use.
type EpisodeDriver struct {
	l           *loop
	numEpisodes int64
	// per-row mode state, reused between runs
	phase  []rowPhase
	done   []int64
	active []bool
}

type rowPhase uint8

const (
	phaseWaiting    rowPhase = iota // waiting for a First step
	phaseCollecting                 // inside a collected episode
	phaseFinished                   // has its episodes; idle
)

// NewEpisodeDriver returns a driver whose runs end once numEpisodes
// episodes have ended summed over rows or, with EpisodesPerRow, once every
// row has completed numEpisodes episodes. numEpisodes must be positive.
func NewEpisodeDriver(env Environment, policy Policy, numEpisodes int, opts ...Option) (*EpisodeDriver, error) {
	l, err := newLoop(env, policy, opts)
	if err != nil {
		return nil, err
	}
	if numEpisodes <= 0 {
		return nil, fmt.Errorf("%w: number of episodes %d <= 0", ErrConfig, numEpisodes)
	}
	d := &EpisodeDriver{l: l, numEpisodes: int64(numEpisodes)}
	if l.perRow {
		if len(l.transitions) > 0 {
			return nil, fmt.Errorf("%w: EpisodesPerRow cannot be used with transition observers (they have no way to receive the active-row mask)", ErrConfig)
		}
		d.phase = make([]rowPhase, l.batch)
		d.done = make([]int64, l.batch)
		d.active = make([]bool, l.batch)
	}
	return d, nil
}

// Run takes batched steps until enough episodes have ended or the maximum
// number of iterations is reached.
//
// By default an episode is counted at its boundary trajectory (StepType
// Last), summed over rows, and the run stops as soon as the count is >=
// the driver's number of episodes: several rows may end episodes in the
// same step, so it may overshoot, and it never undershoots. This is
// TF-Agents' rule, and it favours short episodes (see the package
// documentation).
//
// With EpisodesPerRow, each row contributes exactly the driver's number of
// complete episodes: a row is collected from a First step through its
// boundary trajectory; a row that does not start the run at a First step
// waits (inactive) until its current episode ends; a row that has its
// episodes becomes idle: it is still stepped by the batched environment,
// but its trajectories are marked inactive in Trajectory.Active and not
// counted. The run stops once every row is finished.
//
// ts, state, ctx, the return values and errors are as for StepDriver.Run.
func (d *EpisodeDriver) Run(ctx context.Context, ts *TimeStep, state any) (*TimeStep, any, error) {
	if ctx == nil {
		return ts, state, errNilContext
	}
	l := d.l
	ts, state, err := l.start(ts, state)
	if err != nil {
		return ts, state, err
	}
	if !l.perRow {
		for l.stats.Episodes < d.numEpisodes && l.more() {
			if ts, state, err = l.step(ctx, ts, state, nil); err != nil {
				return ts, state, err
			}
		}
		return ts, state, nil
	}
	for r := range d.phase {
		d.phase[r] = phaseWaiting
		d.done[r] = 0
	}
	finished := 0
	for finished < l.batch && l.more() {
		for r, st := range ts.StepType {
			if d.phase[r] == phaseWaiting && st == tensorbuf.First {
				d.phase[r] = phaseCollecting
			}
			d.active[r] = d.phase[r] == phaseCollecting
		}
		prev := ts
		if ts, state, err = l.step(ctx, ts, state, d.active); err != nil {
			return ts, state, err
		}
		for r, st := range prev.StepType {
			if st != tensorbuf.Last || d.phase[r] != phaseCollecting {
				continue
			}
			d.done[r]++
			if d.done[r] == d.numEpisodes {
				d.phase[r] = phaseFinished
				finished++
			}
		}
	}
	return ts, state, nil
}

// Stats returns the counts of the latest run.
func (d *EpisodeDriver) Stats() RunStats { return d.l.stats }

// SetNumEpisodes sets the number of episodes (per row with EpisodesPerRow)
// of the following runs (> 0), like the num_episodes argument of
// TF-Agents' run. A bad value returns ErrConfig and changes nothing.
func (d *EpisodeDriver) SetNumEpisodes(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: number of episodes %d <= 0", ErrConfig, n)
	}
	d.numEpisodes = int64(n)
	return nil
}

// SetMaxIterations sets the maximum iterations of the following runs (0:
// no bound). A negative value returns ErrConfig and changes nothing.
func (d *EpisodeDriver) SetMaxIterations(n int) error { return d.l.setMaxIterations(n) }
