package driver_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

const (
	F = tensorbuf.First
	M = tensorbuf.Mid
	L = tensorbuf.Last
)

// TestIssue5CountingFacts pins down what observers see with the Counting
// environment (episodes of 3 steps: F, M, M, L, then the boundary; one
// row) and a step driver of num_steps = 4: five trajectories, the fourth
// being the boundary, which is not counted as a step.
func TestIssue5CountingFacts(t *testing.T) {
	env := mustCounting(3)
	pol := newCountPolicy(env)
	rec := &recorder{}
	d, err := driver.NewStepDriver(env, pol, 4, driver.WithObservers(rec))
	if err != nil {
		t.Fatal(err)
	}
	ts, state, err := d.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{Count: 0, Type: F, Next: M, Action: 0, Reward: 0, Disc: 1},
		{Count: 1, Type: M, Next: M, Action: 1, Reward: 1, Disc: 1},
		{Count: 2, Type: M, Next: L, Action: 2, Reward: 2, Disc: 0},
		{Count: 3, Type: L, Next: F, Action: 3, Reward: 0, Disc: 1}, // boundary: action ignored
		{Count: 4, Type: F, Next: M, Action: 4, Reward: 4, Disc: 1},
	}
	if !reflect.DeepEqual(rec.rows[0], want) {
		t.Errorf("observed\n%v\nwant\n%v", rec.rows[0], want)
	}
	if rec.n != 5 {
		t.Errorf("Observe called %d times, want 5", rec.n)
	}
	if got := d.Stats(); got != (driver.RunStats{Iterations: 5, Steps: 4, Episodes: 1}) {
		t.Errorf("stats %+v", got)
	}
	if c := countOf(ts); ts.StepType[0] != M || c[0] != 5 || state != 5 {
		t.Errorf("final step %v count %v state %v, want M 5 5", ts.StepType[0], c[0], state)
	}
}

// Rows with episodes of 1, 2 and 3 steps have boundary trajectories at
// t = 1,3,5,7 / 2,5 / 3,7. Non-boundary steps summed over rows after
// iterations 1..8: 3 5 7 8 11 12 15 16; boundaries: 0 1 2 4 4 6 6 8.
func TestStepDriverCounting(t *testing.T) {
	for _, tc := range []struct {
		numSteps, maxIter  int
		iters, steps, epis int64
	}{
		{1, 0, 1, 3, 0}, // overshoot by 2
		{3, 0, 1, 3, 0},
		{4, 0, 2, 5, 1},
		{5, 0, 2, 5, 1},
		{6, 0, 3, 7, 2},
		{8, 0, 4, 8, 4},
		{9, 0, 5, 11, 4},
		{12, 0, 6, 12, 6},
		{13, 0, 7, 15, 6},
		{16, 0, 8, 16, 8},
		{100, 3, 3, 7, 2}, // maximum iterations
		{16, 8, 8, 16, 8},
		{16, 7, 7, 15, 6},
	} {
		env := mustCounting(1, 2, 3)
		rec := &recorder{}
		var opts []driver.Option
		if tc.maxIter > 0 {
			opts = append(opts, driver.WithMaxIterations(tc.maxIter))
		}
		opts = append(opts, driver.WithObservers(rec))
		d, err := driver.NewStepDriver(env, newCountPolicy(env), tc.numSteps, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ts, _, err := d.Run(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := driver.RunStats{Iterations: tc.iters, Steps: tc.steps, Episodes: tc.epis}
		if got := d.Stats(); got != want {
			t.Errorf("num_steps %d max %d: stats %+v, want %+v", tc.numSteps, tc.maxIter, got, want)
		}
		if rec.n != int(tc.iters) {
			t.Errorf("num_steps %d: %d observer calls, want %d", tc.numSteps, rec.n, tc.iters)
		}
		if got := countOf(ts); !slices.Equal(got, []int64{tc.iters, tc.iters, tc.iters}) {
			t.Errorf("num_steps %d: final counts %v", tc.numSteps, got)
		}
	}
}

func TestStepTypesPerRow(t *testing.T) {
	env := mustCounting(1, 2, 3)
	rec := &recorder{}
	d, err := driver.NewStepDriver(env, newCountPolicy(env), 16, driver.WithObservers(rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"FLFLFLFL", "FMLFMLFM", "FMMLFMML"} {
		if got := rec.types(i); got != want {
			t.Errorf("row %d: step types %s, want %s", i, got, want)
		}
	}
	// Rewards: the action (10*row + t) on non-boundary steps, 0 on the
	// boundary; discount 0 into a Last step.
	r1 := rec.rows[1]
	if r1[0].Reward != 10 || r1[1].Reward != 11 || r1[1].Disc != 0 || r1[2].Reward != 0 || r1[2].Disc != 1 {
		t.Errorf("row 1 trajectories %v", r1)
	}
}

func TestEpisodeDriverCounting(t *testing.T) {
	for _, tc := range []struct {
		numEpisodes, maxIter int
		iters, steps, epis   int64
	}{
		{1, 0, 2, 5, 1},
		{2, 0, 3, 7, 2},
		{3, 0, 4, 8, 4}, // rows 0 and 2 end in the same step: overshoot
		{4, 0, 4, 8, 4},
		{5, 0, 6, 12, 6}, // overshoot again
		{7, 0, 8, 16, 8},
		{100, 5, 5, 11, 4}, // maximum iterations
		{1, 1, 1, 3, 0},    // maximum iterations before the first episode ends
	} {
		env := mustCounting(1, 2, 3)
		opts := []driver.Option{driver.WithMaxIterations(tc.maxIter)}
		d, err := driver.NewEpisodeDriver(env, newCountPolicy(env), tc.numEpisodes, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		want := driver.RunStats{Iterations: tc.iters, Steps: tc.steps, Episodes: tc.epis}
		if got := d.Stats(); got != want {
			t.Errorf("num_episodes %d max %d: stats %+v, want %+v", tc.numEpisodes, tc.maxIter, got, want)
		}
	}
}

// TestEpisodeDriverSingleRow: one row, episodes of 3 steps: one episode is
// F M M L plus the boundary, 4 trajectories; the run stops on the boundary.
func TestEpisodeDriverSingleRow(t *testing.T) {
	env := mustCounting(3)
	rec := &recorder{}
	d, err := driver.NewEpisodeDriver(env, newCountPolicy(env), 2, driver.WithObservers(rec))
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := d.Run(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.types(0); got != "FMMLFMML" {
		t.Errorf("step types %s", got)
	}
	if ts.StepType[0] != F || countOf(ts)[0] != 8 {
		t.Errorf("final step %v count %d, want F 8", ts.StepType[0], countOf(ts)[0])
	}
}

// TestResume: runs that continue from the returned time step and state see
// exactly the trajectories of one longer run, policy state included.
func TestResume(t *testing.T) {
	ctx := context.Background()
	for _, episodes := range []bool{false, true} {
		// One run of 8 iterations.
		env := mustCounting(1, 2, 3)
		whole := &recorder{}
		var d1 interface {
			Run(context.Context, *driver.TimeStep, any) (*driver.TimeStep, any, error)
		}
		var err error
		if episodes {
			d1, err = driver.NewEpisodeDriver(env, newCountPolicy(env), 100, driver.WithObservers(whole), driver.WithMaxIterations(8))
		} else {
			d1, err = driver.NewStepDriver(env, newCountPolicy(env), 16, driver.WithObservers(whole))
		}
		if err != nil {
			t.Fatal(err)
		}
		wantTS, wantState, err := d1.Run(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantCounts := countOf(wantTS)

		// The same in pieces of 2 + 2 + 4 iterations: step drivers of 4
		// (5 steps in 2 iterations), 3 (3 in 2) and 8 (8 in 4); episode
		// drivers of 1 (1 in 2), 2 (2 in 2) and 3 (4 in 4).
		env2 := mustCounting(1, 2, 3)
		parts := &recorder{}
		var ts *driver.TimeStep
		var state any
		var runs []func() error
		if episodes {
			for _, n := range []int{1, 2, 3} {
				d, err := driver.NewEpisodeDriver(env2, newCountPolicy(env2), n, driver.WithObservers(parts))
				if err != nil {
					t.Fatal(err)
				}
				runs = append(runs, func() error { ts, state, err = d.Run(ctx, ts, state); return err })
			}
		} else {
			for _, n := range []int{4, 3, 8} {
				d, err := driver.NewStepDriver(env2, newCountPolicy(env2), n, driver.WithObservers(parts))
				if err != nil {
					t.Fatal(err)
				}
				runs = append(runs, func() error { ts, state, err = d.Run(ctx, ts, state); return err })
			}
		}
		for _, run := range runs {
			if err := run(); err != nil {
				t.Fatal(err)
			}
		}
		if parts.n != 8 || whole.n != 8 {
			t.Fatalf("episodes=%v: %d and %d iterations, want 8", episodes, parts.n, whole.n)
		}
		if !reflect.DeepEqual(parts.rows, whole.rows) {
			t.Errorf("episodes=%v: resumed runs saw\n%v\none run saw\n%v", episodes, parts.rows, whole.rows)
		}
		if !slices.Equal(countOf(ts), wantCounts) || state != wantState || state != 8 {
			t.Errorf("episodes=%v: final counts %v state %v, want %v %v", episodes, countOf(ts), state, wantCounts, wantState)
		}
	}
}

// TestRunWithoutTimeStepResets: a run given no time step resets the
// environment and asks the policy for its initial state; a run given a
// time step but no state keeps the environment and starts a new state.
func TestRunWithoutTimeStepResets(t *testing.T) {
	ctx := context.Background()
	env := mustCounting(3)
	rec := &recorder{}
	d, err := driver.NewStepDriver(env, newCountPolicy(env), 2, driver.WithObservers(rec))
	if err != nil {
		t.Fatal(err)
	}
	for _, resume := range []bool{false, false, true} {
		var ts *driver.TimeStep
		if resume {
			ts = env.Current()
		}
		if _, _, err := d.Run(ctx, ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantCounts := []int64{0, 1, 0, 1, 2, 3, 4}
	wantActions := []int64{0, 1, 0, 1, 0, 1, 2}
	var acts []int64
	for _, s := range rec.rows[0] {
		acts = append(acts, s.Action)
	}
	if !slices.Equal(rec.counts(0), wantCounts) || !slices.Equal(acts, wantActions) {
		t.Errorf("counts %v actions %v, want %v %v", rec.counts(0), acts, wantCounts, wantActions)
	}
}

func TestTransitionObserversFirst(t *testing.T) {
	env := mustCounting(2, 3)
	var log []string
	tobs := func(name string) driver.TransitionObserver {
		return driver.TransitionObserverFunc(func(ts *driver.TimeStep, ps *driver.PolicyStep, next *driver.TimeStep) error {
			c, n := countOf(ts), countOf(next)
			a := ps.Action["action"].Int64s()
			for r := range c {
				if n[r] != c[r]+1 {
					t.Errorf("%s: row %d: next count %d after %d", name, r, n[r], c[r])
				}
				if a[r] != int64(10*r)+c[r] {
					t.Errorf("%s: row %d: action %d at count %d", name, r, a[r], c[r])
				}
			}
			log = append(log, name)
			return nil
		})
	}
	obs := func(name string) driver.Observer {
		return driver.ObserverFunc(func(*driver.Trajectory) error { log = append(log, name); return nil })
	}
	d, err := driver.NewStepDriver(env, newCountPolicy(env), 4,
		driver.WithObservers(obs("O0"), obs("O1")),
		driver.WithTransitionObservers(tobs("T0"), tobs("T1")))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"T0", "T1", "O0", "O1", "T0", "T1", "O0", "O1"}
	if !slices.Equal(log, want) {
		t.Errorf("call order %v, want %v", log, want)
	}
}

var errObserver = errors.New("test observer failure")

func TestErrors(t *testing.T) {
	ctx := context.Background()
	failObserverAt := func(iter int, row int) driver.Observer {
		n := 0
		return driver.ObserverFunc(func(*driver.Trajectory) error {
			n++
			if n-1 == iter {
				if row >= 0 {
					return &driver.RowError{Row: row, Err: errObserver}
				}
				return errObserver
			}
			return nil
		})
	}
	for _, tc := range []struct {
		name      string
		build     func(env driver.Environment, pol *countPolicy) []driver.Option
		failAt    int // policy fails on this call
		badAction bool
		stage     driver.Stage
		iter      int64
		row       int
		index     int
		sentinel  error
		cause     error
		count     int64 // count of the returned time step
	}{
		{name: "policy", failAt: 2, stage: driver.StagePolicy, iter: 2, row: -1, index: -1,
			sentinel: driver.ErrPolicy, cause: errPolicy, count: 2},
		{name: "observer with row", build: func(driver.Environment, *countPolicy) []driver.Option {
			return []driver.Option{driver.WithObservers(failObserverAt(100, -1), failObserverAt(3, 1))}
		}, failAt: -1, stage: driver.StageObserver, iter: 3, row: 1, index: 1,
			sentinel: driver.ErrObserver, cause: errObserver, count: 4},
		{name: "transition observer", build: func(driver.Environment, *countPolicy) []driver.Option {
			n := 0
			return []driver.Option{driver.WithTransitionObservers(driver.TransitionObserverFunc(
				func(*driver.TimeStep, *driver.PolicyStep, *driver.TimeStep) error {
					if n++; n == 2 {
						return errObserver
					}
					return nil
				}))}
		}, failAt: -1, stage: driver.StageTransitionObserver, iter: 1, row: -1, index: 0,
			sentinel: driver.ErrObserver, cause: errObserver, count: 2},
		{name: "env bad action", badAction: true, failAt: -1, stage: driver.StageEnv, iter: 0, row: 1, index: -1,
			sentinel: driver.ErrEnv, cause: driver.ErrSpec, count: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := mustCounting(2, 3)
			pol := newCountPolicy(env)
			pol.failAt = tc.failAt
			var opts []driver.Option
			if tc.build != nil {
				opts = tc.build(env, pol)
			}
			var p driver.Policy = pol
			if tc.badAction {
				p = badActionPolicy{pol}
			}
			d, err := driver.NewStepDriver(env, p, 100, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ts, _, err := d.Run(ctx, nil, nil)
			var se *driver.StepError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *StepError", err)
			}
			if se.Stage != tc.stage || se.Iteration != tc.iter || se.Row != tc.row || se.Index != tc.index {
				t.Errorf("got stage %v iteration %d row %d index %d, want %v %d %d %d (%v)",
					se.Stage, se.Iteration, se.Row, se.Index, tc.stage, tc.iter, tc.row, tc.index, err)
			}
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, tc.cause) {
				t.Errorf("error %v does not wrap %v and %v", err, tc.sentinel, tc.cause)
			}
			if ts == nil || countOf(ts)[0] != tc.count {
				t.Errorf("returned time step %v, want count %d", ts, tc.count)
			}
		})
	}
}

// badActionPolicy sets row 1's action out of range.
type badActionPolicy struct{ *countPolicy }

func (p badActionPolicy) Action(ts *driver.TimeStep, state any) (*driver.PolicyStep, error) {
	ps, err := p.countPolicy.Action(ts, state)
	if err == nil {
		ps.Action["action"].Int64s()[1] = -5
	}
	return ps, err
}

type failingResetEnv struct{ driver.Environment }

var errReset = errors.New("reset failure")

func (failingResetEnv) Reset() (*driver.TimeStep, error) { return nil, errReset }

func TestResetErrorAndCancel(t *testing.T) {
	env := mustCounting(2)
	d, err := driver.NewEpisodeDriver(failingResetEnv{env}, newCountPolicy(env), 1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = d.Run(context.Background(), nil, nil)
	var se *driver.StepError
	if !errors.As(err, &se) || se.Stage != driver.StageReset || !errors.Is(err, driver.ErrEnv) || !errors.Is(err, errReset) {
		t.Errorf("reset failure: got %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	obs := driver.ObserverFunc(func(*driver.Trajectory) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	d2, err := driver.NewStepDriver(env, newCountPolicy(env), 1000, driver.WithObservers(obs))
	if err != nil {
		t.Fatal(err)
	}
	ts, state, err := d2.Run(ctx, nil, nil)
	if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Stage != driver.StageCanceled || se.Iteration != 3 {
		t.Errorf("cancel: got %v", err)
	}
	if countOf(ts)[0] != 3 || state != 3 || d2.Stats().Iterations != 3 {
		t.Errorf("cancel: count %d state %v stats %+v, want 3 3", countOf(ts)[0], state, d2.Stats())
	}
}

func TestBadConfig(t *testing.T) {
	env := mustCounting(2)
	pol := newCountPolicy(env)
	tobs := driver.TransitionObserverFunc(func(*driver.TimeStep, *driver.PolicyStep, *driver.TimeStep) error { return nil })
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"zero steps", func() error { _, err := driver.NewStepDriver(env, pol, 0); return err }()},
		{"negative max iterations", func() error {
			_, err := driver.NewStepDriver(env, pol, 1, driver.WithMaxIterations(-1))
			return err
		}()},
		{"per-row step driver", func() error { _, err := driver.NewStepDriver(env, pol, 1, driver.EpisodesPerRow()); return err }()},
		{"per-row with transition observers", func() error {
			_, err := driver.NewEpisodeDriver(env, pol, 1, driver.EpisodesPerRow(), driver.WithTransitionObservers(tobs))
			return err
		}()},
		{"zero episodes", func() error { _, err := driver.NewEpisodeDriver(env, pol, 0); return err }()},
		{"nil env", func() error { _, err := driver.NewEpisodeDriver(nil, pol, 1); return err }()},
		{"nil observer", func() error { _, err := driver.NewStepDriver(env, pol, 1, driver.WithObservers(nil)); return err }()},
	} {
		if !errors.Is(tc.err, driver.ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", tc.name, tc.err)
		}
	}
	// A run given a time step of the wrong batch size fails before stepping.
	d, err := driver.NewStepDriver(env, pol, 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := &driver.TimeStep{StepType: make([]tensorbuf.StepType, 3), Reward: make([]float32, 3), Discount: make([]float32, 3)}
	if _, _, err := d.Run(context.Background(), bad, nil); !errors.Is(err, driver.ErrSpec) || pol.calls != 0 {
		t.Errorf("bad time step: got %v after %d policy calls", err, pol.calls)
	}
}

func TestSetTargets(t *testing.T) {
	ctx := context.Background()
	env := mustCounting(1, 2, 3)
	sd, err := driver.NewStepDriver(env, newCountPolicy(env), 1)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := driver.NewEpisodeDriver(env, newCountPolicy(env), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{sd.SetNumSteps(0), sd.SetMaxIterations(-1), ed.SetNumEpisodes(-2), ed.SetMaxIterations(-1)} {
		if !errors.Is(err, driver.ErrConfig) {
			t.Errorf("bad target: %v", err)
		}
	}
	// The refused values changed nothing: 1 step takes 1 iteration.
	if _, _, err := sd.Run(ctx, nil, nil); err != nil || sd.Stats().Iterations != 1 {
		t.Fatalf("%v %+v", err, sd.Stats())
	}
	if err := sd.SetNumSteps(9); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sd.Run(ctx, nil, nil); err != nil || sd.Stats() != (driver.RunStats{Iterations: 5, Steps: 11, Episodes: 4}) {
		t.Errorf("9 steps: %v %+v", err, sd.Stats())
	}
	if err := sd.SetMaxIterations(3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sd.Run(ctx, nil, nil); err != nil || sd.Stats().Iterations != 3 {
		t.Errorf("max 3: %v %+v", err, sd.Stats())
	}
	if err := ed.SetNumEpisodes(5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ed.Run(ctx, nil, nil); err != nil || ed.Stats() != (driver.RunStats{Iterations: 6, Steps: 12, Episodes: 6}) {
		t.Errorf("5 episodes: %v %+v", err, ed.Stats())
	}
	if err := ed.SetMaxIterations(2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ed.Run(ctx, nil, nil); err != nil || ed.Stats().Iterations != 2 {
		t.Errorf("max 2: %v %+v", err, ed.Stats())
	}
}

// TestClone: clones are deep copies that later steps do not change.
func TestClone(t *testing.T) {
	env := mustCounting(2, 3)
	var kept []*driver.Trajectory
	var keptTS []*driver.TimeStep
	obs := driver.ObserverFunc(func(tr *driver.Trajectory) error { kept = append(kept, tr.Clone()); return nil })
	tobs := driver.TransitionObserverFunc(func(ts *driver.TimeStep, _ *driver.PolicyStep, _ *driver.TimeStep) error {
		keptTS = append(keptTS, ts.Clone())
		return nil
	})
	d, err := driver.NewStepDriver(env, newCountPolicy(env), 10, driver.WithObservers(obs), driver.WithTransitionObservers(tobs))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	wantTypes := [][]tensorbuf.StepType{{F, F}, {M, M}, {L, M}, {F, L}, {M, F}, {L, M}, {F, M}}
	if len(kept) != len(wantTypes) {
		t.Fatalf("%d trajectories", len(kept))
	}
	for i, tr := range kept {
		if tr.BatchSize() != 2 || !slices.Equal(tr.StepType, wantTypes[i]) || !slices.Equal(tr.Observation["count"].Int64s(), []int64{int64(i), int64(i)}) ||
			!slices.Equal(tr.Action["action"].Int64s(), []int64{int64(i), int64(10 + i)}) || tr.Active != nil {
			t.Errorf("kept trajectory %d: %v %v %v", i, tr.StepType, tr.Observation["count"], tr.Action["action"])
		}
		if ts := keptTS[i]; ts.BatchSize() != 2 || !slices.Equal(ts.StepType, wantTypes[i]) || !slices.Equal(countOf(ts), []int64{int64(i), int64(i)}) {
			t.Errorf("kept time step %d: %v %v", i, ts.StepType, countOf(ts))
		}
	}
}
