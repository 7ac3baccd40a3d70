package observer_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

type metrics struct {
	steps    *observer.EnvironmentSteps
	episodes *observer.NumberOfEpisodes
	ret      *observer.AverageReturn
	length   *observer.AverageEpisodeLength
}

func newMetrics(t testing.TB, batch, k int) metrics {
	t.Helper()
	ret, err := observer.NewAverageReturn(batch, k)
	if err != nil {
		t.Fatal(err)
	}
	length, err := observer.NewAverageEpisodeLength(batch, k)
	if err != nil {
		t.Fatal(err)
	}
	return metrics{&observer.EnvironmentSteps{}, &observer.NumberOfEpisodes{}, ret, length}
}

func (m metrics) observers() []driver.Observer {
	return []driver.Observer{m.steps, m.episodes, m.ret, m.length}
}

type metricValues struct {
	steps, episodes int64
	ret, length     float64
}

func (m metrics) total() metricValues {
	return metricValues{m.steps.Result(), m.episodes.Result(), m.ret.Result(), m.length.Result()}
}

func (m metrics) run() metricValues {
	return metricValues{m.steps.RunResult(), m.episodes.RunResult(), m.ret.RunResult(), m.length.RunResult()}
}

func (m metrics) startRun() {
	m.steps.StartRun()
	m.episodes.StartRun()
	m.ret.StartRun()
	m.length.StartRun()
}

// TestMetrics follows TF-Agents' tf_metrics over two runs of 4 iterations
// of Counting rows with episodes F M L and F M M L, the action (hence the
// reward) at iteration n being n. Episodes end (NextStepType Last) at
// t1 (row 0, return 0+1, length 2), t2 (row 1, 0+1+2, 3), t4 (row 0,
// 3+4, 2), t6 (row 1, 4+5+6, 3) and t7 (row 0, 6+7, 2).
func TestMetrics(t *testing.T) {
	m := newMetrics(t, 2, 4)
	env := counting(t, 2, 3)
	d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(m.observers()...), driver.WithMaxIterations(4))
	if err != nil {
		t.Fatal(err)
	}
	ts, state, err := d.Run(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run1 := metricValues{steps: 6, episodes: 2, ret: (1.0 + 3) / 2, length: (2.0 + 3) / 2}
	if got := m.total(); got != run1 {
		t.Errorf("after run 1: total %+v, want %+v", got, run1)
	}
	if got := m.run(); got != run1 {
		t.Errorf("after run 1: run %+v, want %+v", got, run1)
	}
	m.startRun()
	if got := m.run(); got != (metricValues{}) {
		t.Errorf("after StartRun: run %+v, want zeros", got)
	}
	if _, _, err := d.Run(t.Context(), ts, state); err != nil {
		t.Fatal(err)
	}
	// The window of 4 holds the last 4 episodes overall, the last 3 in
	// run 2.
	total := metricValues{steps: 12, episodes: 5, ret: (3.0 + 7 + 15 + 13) / 4, length: (3.0 + 2 + 3 + 2) / 4}
	run2 := metricValues{steps: 6, episodes: 3, ret: (7.0 + 15 + 13) / 3, length: (2.0 + 3 + 2) / 3}
	if got := m.total(); got != total {
		t.Errorf("after run 2: total %+v, want %+v", got, total)
	}
	if got := m.run(); got != run2 {
		t.Errorf("after run 2: run %+v, want %+v", got, run2)
	}
	// The driver counts steps the same way; it counts episodes at the
	// boundary (t3 and t5 in run 2, t7's boundary is not yet seen).
	if s := d.Stats(); s.Steps != run2.steps || s.Episodes != 2 {
		t.Errorf("driver stats %+v", s)
	}
	m.steps.Reset()
	m.episodes.Reset()
	m.ret.Reset()
	m.length.Reset()
	if got, got2 := m.total(), m.run(); got != (metricValues{}) || got2 != (metricValues{}) {
		t.Errorf("after Reset: %+v, %+v", got, got2)
	}
}

// TestMetricsPerRow: in per-row episode mode inactive rows are ignored,
// so the metrics agree with the driver's counts.
func TestMetricsPerRow(t *testing.T) {
	m := newMetrics(t, 2, 10)
	env := counting(t, 1, 3)
	d, err := driver.NewEpisodeDriver(env, newIterPolicy(t, env), 2, driver.WithObservers(m.observers()...), driver.EpisodesPerRow())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	// Row 0: F->L at t0 and t2 (returns 0 and 2); row 1: t0..t2 (0+1+2)
	// and t4..t6 (4+5+6). Row 0's idle steps t4..t7 are not counted.
	want := metricValues{steps: 8, episodes: 4, ret: (0.0 + 3 + 2 + 15) / 4, length: (1.0 + 3 + 1 + 3) / 4}
	if got := m.total(); got != want {
		t.Errorf("metrics %+v, want %+v", got, want)
	}
	if s := d.Stats(); s.Steps != want.steps || s.Episodes != want.episodes {
		t.Errorf("driver stats %+v, want %d steps and %d episodes", s, want.steps, want.episodes)
	}
}

func TestMetricErrors(t *testing.T) {
	if _, err := observer.NewAverageReturn(0, 10); !errors.Is(err, observer.ErrConfig) {
		t.Errorf("batch 0: err %v", err)
	}
	if _, err := observer.NewAverageEpisodeLength(2, 0); !errors.Is(err, observer.ErrConfig) {
		t.Errorf("window 0: err %v", err)
	}
	m := newMetrics(t, 2, 3)
	one := trajectory([]tensorbuf.StepType{F}, []tensorbuf.StepType{L}, []int64{0})
	one.Reward[0] = 5
	for i, o := range m.observers()[2:] {
		if err := o.Observe(one); !errors.Is(err, observer.ErrTrajectory) {
			t.Errorf("observer %d: batch 1 for 2 rows: err %v", i, err)
		}
	}
	for i, o := range m.observers() {
		if err := o.Observe(nil); !errors.Is(err, observer.ErrTrajectory) {
			t.Errorf("observer %d: nil: err %v", i, err)
		}
	}
	if got := m.total(); got != (metricValues{}) {
		t.Errorf("refused trajectories changed the metrics: %+v", got)
	}
}

// TestConcurrentCollectAndLearn runs a driver into a TrajectorySequence
// observer and metrics while a learner samples the table and reads the
// metrics (run with -race). Every sampled item must be a window of
// consecutive steps of one row.
func TestConcurrentCollectAndLearn(t *testing.T) {
	buf := newBuffer(t, 4, 32)
	tb, err := buf.NewTable(tensorbuf.TableConfig{Name: "u", Selector: tensorbuf.Uniform, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"u"}, SequenceLength: 4, Stride: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics(t, 4, 5)
	env := counting(t, 3, 4, 5, 6)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var samples int
	var learnErr error
	wg.Go(func() {
		var bt tensorbuf.Batch
		defer bt.Release()
		for ctx.Err() == nil {
			_ = m.ret.Result()
			_ = m.steps.Result()
			_ = o.Stats()
			if err := tb.SampleInto(ctx, &bt, 8); err != nil {
				if errors.Is(err, tensorbuf.ErrEmpty) {
					continue
				}
				if ctx.Err() == nil { // not the end of collection
					learnErr = err
				}
				return
			}
			vs, err := hostViews(&bt)
			if err != nil {
				learnErr = err
				return
			}
			for _, v := range vs {
				if v.Len != 4 || v.Pad != 0 || v.Count[0] != v.Start {
					learnErr = errors.New("sampled item " + v.String() + " is not a stored window of 4 steps")
					return
				}
				for k := 1; k < 4; k++ {
					if v.Count[k] != v.Count[k-1]+1 {
						learnErr = errors.New("sampled window " + v.String() + " is not consecutive")
						return
					}
				}
			}
			samples++
		}
	})
	stats := runSteps(t, env, 40000, append(m.observers(), o)...)
	cancel()
	wg.Wait()
	if learnErr != nil {
		t.Fatal(learnErr)
	}
	if samples == 0 {
		t.Log("the learner never got a sample (machine too slow); the collection side was still checked")
	} else {
		t.Logf("the learner checked %d batches of 8", samples)
	}
	if s := o.Stats(); s.Steps != 4*stats.Iterations || m.steps.Result() != stats.Steps {
		t.Errorf("observer stats %+v, metric steps %d; driver %+v", s, m.steps.Result(), stats)
	}
	// Stride 2, length 4, never reset: per row, items at steps 4, 6, ...
	if s := o.Stats(); s.Items != 4*((stats.Iterations-4)/2+1) {
		t.Errorf("items %d, want %d", s.Items, 4*((stats.Iterations-4)/2+1))
	}
}
