package driver_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// singleCounting is one row of envs.Counting as a driver.Env: "count" is
// the number of Reset and Step calls so far minus one.
type singleCounting struct {
	length       int
	calls        int64
	epStep       int64
	steps        int // Step calls
	failOnStep   int // Step call (1-based) that fails; 0: never
	closed       bool
	obsSpec, act []tensorbuf.Field
}

var errEnvFail = errors.New("test env failure")

func newSingleCounting(length int) *singleCounting {
	c := mustCounting(length)
	return &singleCounting{length: length, calls: -1, obsSpec: c.ObservationSpec(), act: c.ActionSpec()}
}

func (e *singleCounting) ObservationSpec() []tensorbuf.Field { return e.obsSpec }
func (e *singleCounting) ActionSpec() []tensorbuf.Field      { return e.act }
func (e *singleCounting) Close() error                       { e.closed = true; return nil }

func (e *singleCounting) Reset(obs map[string]*tensor.Dense) error {
	e.calls++
	e.epStep = 0
	e.write(obs)
	return nil
}

func (e *singleCounting) Step(action, obs map[string]*tensor.Dense) (float32, driver.Status, error) {
	e.steps++
	if e.steps == e.failOnStep {
		return 0, driver.Running, errEnvFail
	}
	e.calls++
	e.epStep++
	e.write(obs)
	a := action[envs.CountActionName].Int64s()[0]
	if e.epStep == int64(e.length) {
		return float32(a), driver.Terminated, nil
	}
	return float32(a), driver.Running, nil
}

func (e *singleCounting) write(obs map[string]*tensor.Dense) {
	obs[envs.CountName].Int64s()[0] = e.calls
	obs[envs.EpisodeStepName].Int64s()[0] = e.epStep
}

func newParallelCounting(t *testing.T, workers int, lengths ...int) (*driver.Parallel, []*singleCounting) {
	t.Helper()
	singles := make([]*singleCounting, len(lengths))
	es := make([]driver.Env, len(lengths))
	for i, n := range lengths {
		singles[i] = newSingleCounting(n)
		es[i] = singles[i]
	}
	p, err := driver.NewParallel(es, workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, singles
}

// TestParallelMatchesBatched: a Parallel of single counting environments,
// with any number of workers, yields the trajectories of the vectorised
// Counting environment.
func TestParallelMatchesBatched(t *testing.T) {
	lengths := []int{1, 2, 3, 5, 4}
	run := func(env driver.Environment) (*recorder, []int64, []int64) {
		rec := &recorder{}
		d, err := driver.NewStepDriver(env, newCountPolicy(env), 60, driver.WithObservers(rec))
		if err != nil {
			t.Fatal(err)
		}
		ts, _, err := d.Run(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rec, countOf(ts), slices.Clone(ts.Observation[envs.EpisodeStepName].Int64s())
	}
	want, wantCount, wantEp := run(mustCounting(lengths...))
	for _, workers := range []int{1, 2, 3, 5, 8, 0} {
		p, _ := newParallelCounting(t, workers, lengths...)
		got, gotCount, gotEp := run(p)
		if !reflect.DeepEqual(got.rows, want.rows) {
			t.Errorf("workers %d: trajectories differ:\n%v\nwant\n%v", workers, got.rows, want.rows)
		}
		if !slices.Equal(gotCount, wantCount) || !slices.Equal(gotEp, wantEp) {
			t.Errorf("workers %d: final observations %v %v, want %v %v", workers, gotCount, gotEp, wantCount, wantEp)
		}
	}
}

func TestParallelRowErrors(t *testing.T) {
	p, singles := newParallelCounting(t, 3, 10, 10, 10, 10, 10)
	singles[3].failOnStep = 4
	singles[1].failOnStep = 4
	d, err := driver.NewStepDriver(p, newCountPolicy(p), 1000)
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := d.Run(context.Background(), nil, nil)
	var se *driver.StepError
	if !errors.As(err, &se) || se.Stage != driver.StageEnv || se.Iteration != 3 || se.Row != 1 {
		t.Fatalf("got %v (%+v), want env failure at iteration 3, row 1", err, se)
	}
	if !errors.Is(err, driver.ErrEnv) || !errors.Is(err, errEnvFail) {
		t.Errorf("%v does not wrap ErrEnv and the env's error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "row 1: test env failure") || !strings.Contains(msg, "row 3: test env failure") {
		t.Errorf("message %q does not name both rows", msg)
	}
	// The time step from before the failed step stays current.
	if countOf(ts)[0] != 3 || p.Current() != ts {
		t.Errorf("returned count %d, current %p, returned %p", countOf(ts)[0], p.Current(), ts)
	}
	act, _ := driver.NewTensors(p.ActionSpec(), 5)
	if _, err := p.Step(act); !errors.Is(err, driver.ErrNotReset) {
		t.Errorf("step after failure: %v, want ErrNotReset", err)
	}
	if _, err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Step(act); err != nil {
		t.Errorf("step after Reset: %v", err)
	}
}

func TestParallelBadInput(t *testing.T) {
	p, singles := newParallelCounting(t, 2, 3, 3)
	act, _ := driver.NewTensors(p.ActionSpec(), 2)
	if _, err := p.Step(act); !errors.Is(err, driver.ErrNotReset) {
		t.Errorf("step before reset: %v", err)
	}
	ts, err := p.Reset()
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]map[string]*tensor.Dense{
		"missing":     {},
		"wrong dtype": {envs.CountActionName: tensor.New(tensor.Of(tensor.Int32), tensor.WithShape(2))},
		"wrong batch": {envs.CountActionName: int64Tensor(1, 2, 3)},
		"wrong shape": {envs.CountActionName: tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(2, 1))},
	} {
		if _, err := p.Step(a); !errors.Is(err, driver.ErrSpec) {
			t.Errorf("%s: %v, want ErrSpec", name, err)
		}
	}
	if p.Current() != ts || singles[0].steps != 0 || singles[1].steps != 0 {
		t.Errorf("a refused step changed the environment")
	}
	if err := p.Close(); err != nil || !singles[0].closed || !singles[1].closed {
		t.Errorf("Close: %v, closed %v %v", err, singles[0].closed, singles[1].closed)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Step(act); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("step after Close: %v", err)
	}

	if _, err := driver.NewParallel(nil, 1); !errors.Is(err, driver.ErrConfig) {
		t.Errorf("no envs: %v", err)
	}
	other := newSingleCounting(1)
	other.act = []tensorbuf.Field{{Name: "other", DType: tensorbuf.Int32}}
	if _, err := driver.NewParallel([]driver.Env{newSingleCounting(1), other}, 1); !errors.Is(err, driver.ErrSpec) {
		t.Errorf("different specs: %v", err)
	}
}

// TestParallelCartPole: a Parallel of one CartPoleEnv follows row 0 of the
// vectorised CartPole with the same seed, through many episodes.
func TestParallelCartPole(t *testing.T) {
	batched, err := envs.NewCartPole(1, 42)
	if err != nil {
		t.Fatal(err)
	}
	p, err := driver.NewParallel([]driver.Env{envs.NewCartPoleEnv(42)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	type row struct {
		obs  [4]float32
		st   tensorbuf.StepType
		r, d float32
	}
	run := func(env driver.Environment) []row {
		pol, err := driver.NewRandomPolicy(env.ActionSpec(), 9)
		if err != nil {
			t.Fatal(err)
		}
		var rows []row
		obs := driver.TransitionObserverFunc(func(_ *driver.TimeStep, _ *driver.PolicyStep, n *driver.TimeStep) error {
			var o [4]float32
			copy(o[:], n.Observation[envs.CartPoleObservationName].Float32s())
			rows = append(rows, row{o, n.StepType[0], n.Reward[0], n.Discount[0]})
			return nil
		})
		d, err := driver.NewStepDriver(env, pol, 2000, driver.WithTransitionObservers(obs))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	want, got := run(batched), run(p)
	if len(got) != len(want) || len(got) < 2000 {
		t.Fatalf("%d and %d steps", len(got), len(want))
	}
	episodes := 0
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: parallel %+v, batched %+v", i, got[i], want[i])
		}
		if want[i].st == tensorbuf.Last {
			episodes++
		}
	}
	if episodes < 20 {
		t.Errorf("only %d episodes in 2000 random steps", episodes)
	}
}
