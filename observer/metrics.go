package observer

import (
	"fmt"
	"sync"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// counter is a cumulative count and a per-run count.
type counter struct{ total, run int64 }

func (c *counter) add(n int64) { c.total += n; c.run += n }

// runCounter is the count of EnvironmentSteps and NumberOfEpisodes: since
// creation or Reset, and since the latest StartRun. The zero value is
// ready to use; it is safe for concurrent use.
type runCounter struct {
	mu sync.Mutex
	c  counter
}

func (m *runCounter) add(n int64) { m.mu.Lock(); m.c.add(n); m.mu.Unlock() }

// Result returns the count since creation or Reset.
func (m *runCounter) Result() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.c.total }

// RunResult returns the count since the latest StartRun (or creation).
func (m *runCounter) RunResult() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.c.run }

// StartRun starts a new run: RunResult counts from zero again.
func (m *runCounter) StartRun() { m.mu.Lock(); m.c.run = 0; m.mu.Unlock() }

// Reset sets both counts to zero.
func (m *runCounter) Reset() { m.mu.Lock(); m.c = counter{}; m.mu.Unlock() }

// window holds the last k values added, cumulatively and per run.
type window struct {
	k          int
	total, run ring
}

type ring struct {
	vals []float64
	next int
	n    int
}

func (r *ring) add(k int, v float64) {
	if r.vals == nil {
		r.vals = make([]float64, k)
	}
	r.vals[r.next] = v
	r.next = (r.next + 1) % k
	r.n = min(r.n+1, k)
}

// mean returns the mean of the values held, 0 when there are none (as
// TF-Agents' TFDeque).
func (r *ring) mean() float64 {
	if r.n == 0 {
		return 0
	}
	var s float64
	for _, v := range r.vals[:r.n] {
		s += v
	}
	return s / float64(r.n)
}

func (r *ring) clear() { r.next, r.n = 0, 0 }

func (w *window) add(v float64) { w.total.add(w.k, v); w.run.add(w.k, v) }

// checkMetricTrajectory refuses, with ErrTrajectory, a nil trajectory,
// one of another batch size (when batch > 0), columns of different
// lengths, and step types other than First, Mid and Last (in every row,
// active or not), so that a refused trajectory changes no metric.
func checkMetricTrajectory(kind string, t *driver.Trajectory, batch int) error {
	if t == nil {
		return fmt.Errorf("%w: %s: nil trajectory", ErrTrajectory, kind)
	}
	n := len(t.StepType)
	if batch > 0 && n != batch {
		return fmt.Errorf("%w: %s: batch size %d, trajectory has %d rows", ErrTrajectory, kind, batch, n)
	}
	if len(t.NextStepType) != n || len(t.Reward) != n || (t.Active != nil && len(t.Active) != n) {
		return fmt.Errorf("%w: %s: %d step types, %d next step types, %d rewards, %d active flags",
			ErrTrajectory, kind, n, len(t.NextStepType), len(t.Reward), len(t.Active))
	}
	for i := range n {
		if !validStepType(t.StepType[i]) || !validStepType(t.NextStepType[i]) {
			return fmt.Errorf("%w: %s: batch row %d: step types %d, %d", ErrTrajectory, kind, i, t.StepType[i], t.NextStepType[i])
		}
	}
	return nil
}

// EnvironmentSteps counts the non-boundary trajectories observed, summed
// over rows (TF-Agents' EnvironmentSteps). The zero value is ready to use;
// it is safe for concurrent use.
type EnvironmentSteps struct {
	runCounter // Result, RunResult, StartRun, Reset
}

// Observe counts the trajectory's non-boundary active rows. A malformed
// trajectory (see AverageReturn.Observe) is refused with ErrTrajectory and
// changes nothing.
func (m *EnvironmentSteps) Observe(t *driver.Trajectory) error {
	if err := checkMetricTrajectory("EnvironmentSteps", t, 0); err != nil {
		return err
	}
	var n int64
	for i, st := range t.StepType {
		if t.IsActive(i) && st != tensorbuf.Last {
			n++
		}
	}
	m.add(n)
	return nil
}

// NumberOfEpisodes counts the episodes that ended: trajectories whose
// NextStepType is Last, summed over rows (TF-Agents' NumberOfEpisodes).
// Note that drivers count an episode one step later, at its boundary
// trajectory. The zero value is ready to use; it is safe for concurrent
// use.
type NumberOfEpisodes struct {
	runCounter // Result, RunResult, StartRun, Reset
}

// Observe counts the trajectory's active rows whose next step is Last. A
// malformed trajectory (see AverageReturn.Observe) is refused with
// ErrTrajectory and changes nothing.
func (m *NumberOfEpisodes) Observe(t *driver.Trajectory) error {
	if err := checkMetricTrajectory("NumberOfEpisodes", t, 0); err != nil {
		return err
	}
	var n int64
	for i, st := range t.NextStepType {
		if t.IsActive(i) && st == tensorbuf.Last {
			n++
		}
	}
	m.add(n)
	return nil
}

// episodeWindow is the per-row accumulator and result windows shared by
// AverageReturn and AverageEpisodeLength.
type episodeWindow struct {
	kind string
	mu   sync.Mutex
	acc  []float64
	w    window
}

func newEpisodeWindow(kind string, batchSize, k int) (*episodeWindow, error) {
	if batchSize <= 0 || k <= 0 {
		return nil, fmt.Errorf("%w: %s: batch size %d and window %d must be positive", ErrConfig, kind, batchSize, k)
	}
	return &episodeWindow{kind: kind, acc: make([]float64, batchSize), w: window{k: k}}, nil
}

func (e *episodeWindow) result(run bool) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if run {
		return e.w.run.mean()
	}
	return e.w.total.mean()
}

func (e *episodeWindow) startRun() { e.mu.Lock(); e.w.run.clear(); e.mu.Unlock() }

func (e *episodeWindow) reset() {
	e.mu.Lock()
	clear(e.acc)
	e.w.total.clear()
	e.w.run.clear()
	e.mu.Unlock()
}

// AverageReturn is the mean undiscounted return of the last K episodes
// that ended (TF-Agents' AverageReturnMetric): per row, the return is
// zeroed at a First trajectory, every trajectory's reward is added, and
// the return is recorded when the trajectory's NextStepType is Last.
// Results are 0 before any episode ends. It is safe for concurrent use.
type AverageReturn struct{ e *episodeWindow }

// NewAverageReturn returns an AverageReturn for trajectories of batchSize
// rows over the last k episodes (TF-Agents' buffer_size, 10 by default
// there). Both must be positive (ErrConfig).
func NewAverageReturn(batchSize, k int) (*AverageReturn, error) {
	e, err := newEpisodeWindow("AverageReturn", batchSize, k)
	if err != nil {
		return nil, err
	}
	return &AverageReturn{e: e}, nil
}

// Observe accumulates the trajectory's rewards and records the returns of
// the episodes it ends. A trajectory of another batch size, with columns
// of different lengths, or with a step type other than First, Mid and Last
// is refused with ErrTrajectory and changes nothing.
func (m *AverageReturn) Observe(t *driver.Trajectory) error {
	e := m.e
	if err := checkMetricTrajectory(e.kind, t, len(e.acc)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.acc {
		if !t.IsActive(i) {
			continue
		}
		if t.StepType[i] == tensorbuf.First {
			e.acc[i] = 0
		}
		e.acc[i] += float64(t.Reward[i])
		if t.NextStepType[i] == tensorbuf.Last {
			e.w.add(e.acc[i])
		}
	}
	return nil
}

// Result returns the mean return of the last K episodes since creation or
// Reset.
func (m *AverageReturn) Result() float64 { return m.e.result(false) }

// RunResult returns the mean return of the last K episodes that ended
// since the latest StartRun.
func (m *AverageReturn) RunResult() float64 { return m.e.result(true) }

// StartRun starts a new run; episodes in progress keep their return.
func (m *AverageReturn) StartRun() { m.e.startRun() }

// Reset forgets every return, including those of episodes in progress.
func (m *AverageReturn) Reset() { m.e.reset() }

// AverageEpisodeLength is the mean length of the last K episodes that
// ended (TF-Agents' AverageEpisodeLengthMetric): per row, every
// non-boundary trajectory adds one step, and the length is recorded and
// zeroed when the trajectory's NextStepType is Last. An episode F, M, M, L
// has length 3. It is safe for concurrent use.
type AverageEpisodeLength struct{ e *episodeWindow }

// NewAverageEpisodeLength returns an AverageEpisodeLength for
// trajectories of batchSize rows over the last k episodes. Both must be
// positive (ErrConfig).
func NewAverageEpisodeLength(batchSize, k int) (*AverageEpisodeLength, error) {
	e, err := newEpisodeWindow("AverageEpisodeLength", batchSize, k)
	if err != nil {
		return nil, err
	}
	return &AverageEpisodeLength{e: e}, nil
}

// Observe counts the trajectory's steps and records the lengths of the
// episodes it ends. A malformed trajectory (see AverageReturn.Observe) is
// refused with ErrTrajectory and changes nothing.
func (m *AverageEpisodeLength) Observe(t *driver.Trajectory) error {
	e := m.e
	if err := checkMetricTrajectory(e.kind, t, len(e.acc)); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.acc {
		if !t.IsActive(i) {
			continue
		}
		if t.StepType[i] != tensorbuf.Last {
			e.acc[i]++
		}
		if t.NextStepType[i] == tensorbuf.Last {
			e.w.add(e.acc[i])
			e.acc[i] = 0
		}
	}
	return nil
}

// Result returns the mean length of the last K episodes since creation or
// Reset.
func (m *AverageEpisodeLength) Result() float64 { return m.e.result(false) }

// RunResult returns the mean length of the last K episodes that ended
// since the latest StartRun.
func (m *AverageEpisodeLength) RunResult() float64 { return m.e.result(true) }

// StartRun starts a new run; episodes in progress keep their length.
func (m *AverageEpisodeLength) StartRun() { m.e.startRun() }

// Reset forgets every length, including those of episodes in progress.
func (m *AverageEpisodeLength) Reset() { m.e.reset() }
