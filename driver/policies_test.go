package driver_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// tableQ returns Q-values from a fixed table per row, so greedy actions
// are known.
func tableQ(vals []float32) driver.QFunc {
	return func(_ map[string]*tensor.Dense, q []float32) error {
		copy(q, vals)
		return nil
	}
}

func timeStep(b int) *driver.TimeStep {
	return &driver.TimeStep{StepType: make([]tensorbuf.StepType, b), Reward: make([]float32, b), Discount: make([]float32, b)}
}

func TestLinearSchedule(t *testing.T) {
	s := driver.LinearSchedule{Start: 1, End: 0.04, Steps: 100}
	for _, tc := range []struct {
		t    int64
		want float64
	}{{-5, 1}, {0, 1}, {50, 0.52}, {100, 0.04}, {1000, 0.04}} {
		if got := s.At(tc.t); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("At(%d) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if got := (driver.LinearSchedule{Start: 1, End: 0.3}).At(0); got != 0.3 {
		t.Errorf("constant schedule: %v", got)
	}
}

func TestGreedyPolicy(t *testing.T) {
	for _, dt := range []tensorbuf.DType{tensorbuf.Int64, tensorbuf.Int32, tensorbuf.Uint8} {
		// Row 2 ties (first max wins), row 3 has a NaN first.
		q := []float32{0, 1, 2, 5, 4, 3, 7, 1, 7, float32(math.NaN()), -1, -2}
		p, err := driver.NewGreedyPolicy("a", dt, 3, tableQ(q))
		if err != nil {
			t.Fatal(err)
		}
		ps, err := p.Action(timeStep(4), "state")
		if err != nil {
			t.Fatal(err)
		}
		got := ps.Action["a"].Data()
		var acts []int
		switch x := got.(type) {
		case []int64:
			for _, v := range x {
				acts = append(acts, int(v))
			}
		case []int32:
			for _, v := range x {
				acts = append(acts, int(v))
			}
		case []uint8:
			for _, v := range x {
				acts = append(acts, int(v))
			}
		}
		if !slices.Equal(acts, []int{2, 0, 0, 1}) || ps.State != "state" || p.Steps() != 4 {
			t.Errorf("%v: actions %v state %v steps %d", dt, acts, ps.State, p.Steps())
		}
	}
}

// TestEpsilonGreedyFollowsSchedule checks the exploration rate per phase
// and that a seed reproduces the actions.
func TestEpsilonGreedyFollowsSchedule(t *testing.T) {
	const b, nA = 64, 4
	q := make([]float32, b*nA)
	for r := range b {
		q[r*nA+3] = 1 // greedy action 3 everywhere
	}
	sched := driver.LinearSchedule{Start: 1, End: 0.1, Steps: 64 * 100}
	run := func(seed uint64) (acts []int64, early, late float64) {
		p, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, nA, tableQ(q), sched, seed)
		if err != nil {
			t.Fatal(err)
		}
		ts := timeStep(b)
		var nonGreedyEarly, nonGreedyLate int
		for call := range 300 {
			ps, err := p.Action(ts, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range ps.Action["a"].Int64s() {
				if a < 0 || a >= nA {
					t.Fatalf("action %d", a)
				}
				if a != 3 && call < 5 {
					nonGreedyEarly++
				}
				if a != 3 && call >= 200 {
					nonGreedyLate++
				}
				acts = append(acts, a)
			}
		}
		return acts, float64(nonGreedyEarly) / (5 * b), float64(nonGreedyLate) / (100 * b)
	}
	a1, early, late := run(7)
	a2, _, _ := run(7)
	a3, _, _ := run(8)
	if !slices.Equal(a1, a2) || slices.Equal(a1, a3) {
		t.Fatal("a seed must reproduce the actions, another seed change them")
	}
	// Non-greedy with probability eps*3/4: about 0.73 early, 0.075 late.
	if early < 0.6 || early > 0.85 || late < 0.05 || late > 0.1 {
		t.Fatalf("non-greedy fraction early %v (want ~0.73), late %v (want 0.075)", early, late)
	}
}

func TestEpsilonGreedyRejects(t *testing.T) {
	q := tableQ(nil)
	for _, tc := range []struct {
		name string
		f    func() error
		want error
	}{
		{"float action", func() error {
			_, err := driver.NewGreedyPolicy("a", tensorbuf.Float32, 2, q)
			return err
		}, driver.ErrSpec},
		{"no actions", func() error { _, err := driver.NewGreedyPolicy("a", tensorbuf.Int64, 0, q); return err }, driver.ErrSpec},
		{"257 uint8", func() error { _, err := driver.NewGreedyPolicy("a", tensorbuf.Uint8, 257, q); return err }, driver.ErrSpec},
		{"nil q", func() error { _, err := driver.NewGreedyPolicy("a", tensorbuf.Int64, 2, nil); return err }, driver.ErrConfig},
		{"eps 2", func() error {
			_, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, 2, q, driver.LinearSchedule{Start: 2}, 0)
			return err
		}, driver.ErrConfig},
		{"eps NaN", func() error {
			_, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, 2, q, driver.LinearSchedule{End: math.NaN()}, 0)
			return err
		}, driver.ErrConfig},
	} {
		if err := tc.f(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	boom := errors.New("boom")
	p, err := driver.NewGreedyPolicy("a", tensorbuf.Int64, 2, func(map[string]*tensor.Dense, []float32) error { return boom })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Action(timeStep(2), nil); !errors.Is(err, boom) || !errors.Is(err, driver.ErrPolicy) || p.Steps() != 0 {
		t.Errorf("failing Q: %v, steps %d", err, p.Steps())
	}
	if _, err := p.Action(&driver.TimeStep{}, nil); !errors.Is(err, driver.ErrSpec) {
		t.Errorf("empty time step: %v", err)
	}
}

func TestEpsilonGreedyAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in the full run")
	}
	q := make([]float32, 32*2)
	p, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, 2, tableQ(q), driver.LinearSchedule{Start: 1, End: 0.05, Steps: 1000}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ts := timeStep(32)
	var pf driver.Policy = driver.PolicyFunc(p.Action)
	if _, err := pf.Action(ts, nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = pf.Action(ts, nil) }); n != 0 {
		t.Errorf("Action: %v allocations per call", n)
	}
	if pf.InitialState(3) != nil || pf.InfoSpec() != nil {
		t.Error("PolicyFunc must be stateless without info")
	}
}
