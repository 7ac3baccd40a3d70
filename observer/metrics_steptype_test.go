package observer_test

import (
	"errors"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// TestMetricsRefuseInvalidStepTypes: every metric observer refuses a
// trajectory with a step type other than First, Mid and Last (in any row,
// active or not) with ErrTrajectory, and its state is unchanged: the
// episodes in progress end later with exactly the returns and lengths of
// the valid trajectories.
func TestMetricsRefuseInvalidStepTypes(t *testing.T) {
	const F, M, L = tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	m := newMetrics(t, 2, 10)
	traj := func(st, next []tensorbuf.StepType, reward []float32, active []bool) *driver.Trajectory {
		return &driver.Trajectory{StepType: st, NextStepType: next, Reward: reward, Discount: []float32{1, 1}, Active: active}
	}
	observe := func(tr *driver.Trajectory) {
		t.Helper()
		for i, o := range m.observers() {
			if err := o.Observe(tr); err != nil {
				t.Fatalf("observer %d: %v", i, err)
			}
		}
	}
	observe(traj([]tensorbuf.StepType{F, F}, []tensorbuf.StepType{M, M}, []float32{1, 10}, nil))
	want := metricValues{steps: 2}
	for _, tc := range []struct {
		name string
		tr   *driver.Trajectory
	}{
		{"step type 7", traj([]tensorbuf.StepType{M, 7}, []tensorbuf.StepType{L, L}, []float32{2, 20}, nil)},
		{"next step type -1", traj([]tensorbuf.StepType{M, M}, []tensorbuf.StepType{L, -1}, []float32{2, 20}, nil)},
		{"step type 3 in row 0", traj([]tensorbuf.StepType{3, M}, []tensorbuf.StepType{L, L}, []float32{2, 20}, nil)},
		{"invalid in an inactive row", traj([]tensorbuf.StepType{M, 9}, []tensorbuf.StepType{L, L}, []float32{2, 20}, []bool{true, false})},
	} {
		for i, o := range m.observers() {
			if err := o.Observe(tc.tr); !errors.Is(err, observer.ErrTrajectory) {
				t.Errorf("%s: observer %d: %v, want ErrTrajectory", tc.name, i, err)
			}
		}
		if got := m.total(); got != want {
			t.Fatalf("%s: totals %+v after a refused trajectory, want %+v", tc.name, got, want)
		}
		if got := m.run(); got != want {
			t.Fatalf("%s: run values %+v after a refused trajectory, want %+v", tc.name, got, want)
		}
	}
	observe(traj([]tensorbuf.StepType{M, M}, []tensorbuf.StepType{L, L}, []float32{2, 20}, nil))
	// Returns 1+2 and 10+20, lengths 2 and 2.
	want = metricValues{steps: 4, episodes: 2, ret: 16.5, length: 2}
	if got := m.total(); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
}
