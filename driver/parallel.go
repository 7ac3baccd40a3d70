package driver

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Status is how a single environment's step ended (a plain value).
type Status int

// The outcomes of Env.Step.
const (
	// Running: the episode goes on (step type Mid, discount 1).
	Running Status = iota
	// Terminated: the episode reached a terminal state (Last, discount 0).
	Terminated
	// Truncated: the episode was cut, at a time limit for example (Last,
	// discount 1: the value of the next state still counts).
	Truncated
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case Running:
		return "running"
	case Terminated:
		return "terminated"
	case Truncated:
		return "truncated"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Env is one unbatched environment, the unit Parallel batches. Its
// observation and action tensors are views of one row of the batched
// tensors, shaped like the field (shape [1] for a scalar field). Reset
// starts an episode and Step applies an action; both must write every
// element of obs (the buffer holds older data). The action and obs tensors
// are only valid during the call. An Env is used by one goroutine at a time
// but not always the same one, so it need not be safe for concurrent use
// but must not rely on goroutine-local state.
type Env interface {
	ObservationSpec() []tensorbuf.Field
	ActionSpec() []tensorbuf.Field
	Reset(obs map[string]*tensor.Dense) error
	Step(action, obs map[string]*tensor.Dense) (reward float32, status Status, err error)
}

// Parallel is an Environment made of independent Envs, one per row, stepped
// by a pool of worker goroutines, each owning a contiguous range of rows.
// It implements the auto-reset convention: a row whose last step was Last
// is Reset instead of stepped.
//
// It double-buffers its time steps (each stays valid until the second
// following Step or Reset) and copies the action tensors it is given, so a
// step allocates nothing unless it fails. When Envs fail, Step returns an
// error joining one *RowError per failed row, lowest row first, and the
// environment needs a Reset (ErrNotReset) before the next Step. Parallel is
// not safe for concurrent use; call Close to stop its workers.
type Parallel struct {
	envs      []Env
	obsSpec   []tensorbuf.Field
	actSpec   []tensorbuf.Field
	bufs      [2]*TimeStep
	obsRows   [2][]map[string]*tensor.Dense
	action    map[string]*tensor.Dense
	actRows   []map[string]*tensor.Dense
	cur       int // index in bufs of the current time step; -1 before Reset
	broken    bool
	closed    bool
	errs      []error
	chunks    [][2]int
	start     []chan struct{}
	wg        sync.WaitGroup
	resetting bool // the operation the workers run: Reset every row, or Step
	dst       int  // index in bufs the workers write
}

// NewParallel returns a batched environment over envs (row i is envs[i]),
// stepped by at most workers goroutines (workers <= 0: GOMAXPROCS). All
// envs must have the same specs (names, roles, dtypes and shapes; bounds
// are taken from envs[0]). With one worker, rows are stepped on the
// caller's goroutine. The envs must not be used elsewhere while the
// Parallel is open.
func NewParallel(envs []Env, workers int) (*Parallel, error) {
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: no environments", ErrConfig)
	}
	for i, e := range envs {
		if isNil(e) {
			return nil, fmt.Errorf("%w: environment %d is nil", ErrConfig, i)
		}
	}
	obsSpec, actSpec := envs[0].ObservationSpec(), envs[0].ActionSpec()
	if err := checkSpec(obsSpec); err != nil {
		return nil, fmt.Errorf("observation spec: %w", err)
	}
	if err := checkSpec(actSpec); err != nil {
		return nil, fmt.Errorf("action spec: %w", err)
	}
	for i, e := range envs[1:] {
		if !sameShapes(obsSpec, e.ObservationSpec()) || !sameShapes(actSpec, e.ActionSpec()) {
			return nil, fmt.Errorf("%w: environment %d has specs different from environment 0", ErrSpec, i+1)
		}
	}
	b := len(envs)
	p := &Parallel{envs: envs, obsSpec: obsSpec, actSpec: actSpec, cur: -1, errs: make([]error, b)}
	for k := range p.bufs {
		ts, err := NewTimeStep(obsSpec, b)
		if err != nil {
			return nil, err
		}
		p.bufs[k] = ts
		p.obsRows[k] = rowViews(obsSpec, ts.Observation, b)
	}
	var err error
	if p.action, err = NewTensors(actSpec, b); err != nil {
		return nil, err
	}
	p.actRows = rowViews(actSpec, p.action, b)

	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, b)
	for w := range workers {
		p.chunks = append(p.chunks, [2]int{w * b / workers, (w + 1) * b / workers})
	}
	// Chunk 0 runs on the caller's goroutine; the others on workers.
	for w := 1; w < workers; w++ {
		ch := make(chan struct{})
		p.start = append(p.start, ch)
		go p.worker(w, ch)
	}
	return p, nil
}

func sameShapes(a, b []tensorbuf.Field) bool {
	return slices.EqualFunc(a, b, func(x, y tensorbuf.Field) bool {
		return x.Name == y.Name && x.Role == y.Role && x.DType == y.DType && slices.Equal(x.Shape, y.Shape)
	})
}

// rowViews returns, for every row, a map of tensors viewing that row of
// the batched tensors.
func rowViews(fields []tensorbuf.Field, batched map[string]*tensor.Dense, b int) []map[string]*tensor.Dense {
	rows := make([]map[string]*tensor.Dense, b)
	for r := range rows {
		rows[r] = make(map[string]*tensor.Dense, len(fields))
		for _, f := range fields {
			rows[r][f.Name] = rowView(batched[f.Name], f, r)
		}
	}
	return rows
}

func rowView(d *tensor.Dense, f tensorbuf.Field, r int) *tensor.Dense {
	n := f.Elems()
	lo, hi := r*n, (r+1)*n
	var backing any
	switch f.DType {
	case tensorbuf.Float32:
		backing = d.Float32s()[lo:hi:hi]
	case tensorbuf.Float64:
		backing = d.Float64s()[lo:hi:hi]
	case tensorbuf.Int32:
		backing = d.Int32s()[lo:hi:hi]
	case tensorbuf.Int64:
		backing = d.Int64s()[lo:hi:hi]
	case tensorbuf.Uint8:
		backing = d.Uint8s()[lo:hi:hi]
	case tensorbuf.Bool:
		backing = d.Bools()[lo:hi:hi]
	}
	shape := f.Shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	return tensor.New(tensor.WithBacking(backing), tensor.WithShape(slices.Clone(shape)...))
}

func (p *Parallel) worker(w int, start chan struct{}) {
	for range start {
		p.runChunk(w)
		p.wg.Done()
	}
}

// runChunk resets or steps the rows of chunk w into the buffer after cur.
func (p *Parallel) runChunk(w int) {
	dst := p.dst
	next := p.bufs[dst]
	var prev *TimeStep
	if !p.resetting {
		prev = p.bufs[p.cur]
	}
	for r := p.chunks[w][0]; r < p.chunks[w][1]; r++ {
		p.errs[r] = nil
		if p.resetting || prev.StepType[r] == tensorbuf.Last {
			if err := p.envs[r].Reset(p.obsRows[dst][r]); err != nil {
				p.errs[r] = &RowError{Row: r, Err: err}
			}
			next.StepType[r], next.Reward[r], next.Discount[r] = tensorbuf.First, 0, 1
			continue
		}
		rew, st, err := p.envs[r].Step(p.actRows[r], p.obsRows[dst][r])
		if err != nil {
			p.errs[r] = &RowError{Row: r, Err: err}
			continue
		}
		next.Reward[r] = rew
		switch st {
		case Running:
			next.StepType[r], next.Discount[r] = tensorbuf.Mid, 1
		case Terminated:
			next.StepType[r], next.Discount[r] = tensorbuf.Last, 0
		case Truncated:
			next.StepType[r], next.Discount[r] = tensorbuf.Last, 1
		default:
			p.errs[r] = &RowError{Row: r, Err: fmt.Errorf("%w: unknown status %v", ErrSpec, st)}
		}
	}
}

// run runs every chunk and returns the joined row errors.
func (p *Parallel) run() error {
	p.wg.Add(len(p.start))
	for _, ch := range p.start {
		ch <- struct{}{}
	}
	p.runChunk(0)
	p.wg.Wait()
	var errs []error
	for _, err := range p.errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// BatchSize returns the number of rows (environments).
func (p *Parallel) BatchSize() int { return len(p.envs) }

// ObservationSpec returns the environments' observation spec.
func (p *Parallel) ObservationSpec() []tensorbuf.Field { return p.obsSpec }

// ActionSpec returns the environments' action spec.
func (p *Parallel) ActionSpec() []tensorbuf.Field { return p.actSpec }

// Current returns the latest time step, or nil before the first Reset or
// after a failed one. After a failed Step it still returns the time step
// from before that Step.
func (p *Parallel) Current() *TimeStep {
	if p.cur < 0 {
		return nil
	}
	return p.bufs[p.cur]
}

// Reset resets every row and returns First time steps.
func (p *Parallel) Reset() (*TimeStep, error) {
	if p.closed {
		return nil, ErrClosed
	}
	p.resetting = true
	p.dst = 1 - max(p.cur, 0)
	err := p.run()
	p.resetting = false
	if err != nil {
		p.cur = -1
		return nil, fmt.Errorf("driver: parallel reset: %w", err)
	}
	p.cur, p.broken = p.dst, false
	return p.bufs[p.cur], nil
}

// Step applies one action per row (rows that just ended an episode are
// reset instead and their action ignored) and returns the next time step.
// A bad action tensor is refused with ErrSpec before any row is stepped.
func (p *Parallel) Step(action map[string]*tensor.Dense) (*TimeStep, error) {
	if p.closed {
		return nil, ErrClosed
	}
	if p.cur < 0 || p.broken {
		return nil, ErrNotReset
	}
	if err := CheckTensors(p.actSpec, len(p.envs), action); err != nil {
		return nil, fmt.Errorf("driver: parallel step: %w", err)
	}
	for _, f := range p.actSpec {
		copy(p.action[f.Name].Raw, action[f.Name].Raw)
	}
	p.dst = 1 - p.cur
	if err := p.run(); err != nil {
		p.broken = true
		return nil, fmt.Errorf("driver: parallel step: %w", err)
	}
	p.cur = p.dst
	return p.bufs[p.cur], nil
}

// Close stops the workers and closes the environments that implement
// io.Closer, returning their errors joined. Close is idempotent.
func (p *Parallel) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	for _, ch := range p.start {
		close(ch)
	}
	var errs []error
	for r, e := range p.envs {
		if c, ok := e.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, &RowError{Row: r, Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

var (
	_ Environment = (*Parallel)(nil)
	_ Policy      = (*RandomPolicy)(nil)
)
