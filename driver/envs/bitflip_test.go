package envs

import (
	"context"
	"errors"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

func flips(vals ...int64) map[string]*tensor.Dense {
	return map[string]*tensor.Dense{BitFlipActionName: tensor.New(tensor.WithBacking(vals), tensor.WithShape(len(vals)))}
}

// TestBitFlipDynamics drives row 0 straight to its goal and row 1 back
// and forth on a bit that already matches, and checks rewards, step types
// and discounts step by step.
func TestBitFlipDynamics(t *testing.T) {
	const n = 6
	e, err := NewBitFlip(2, n, 11)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := e.Reset()
	if err != nil {
		t.Fatal(err)
	}
	bits := append([]float32(nil), ts.Observation[BitFlipStateName].Float32s()...)
	goal := append([]float32(nil), ts.Observation[BitFlipGoalName].Float32s()...)
	var diff0 []int64 // bits of row 0 that differ from its goal
	var same1 int64 = -1
	for i := range n {
		if bits[i] != goal[i] {
			diff0 = append(diff0, int64(i))
		}
		if bits[n+i] == goal[n+i] && same1 < 0 {
			same1 = int64(i)
		}
	}
	if len(diff0) < 2 || same1 < 0 {
		t.Fatalf("seed gives a degenerate start: %v %v", bits, goal)
	}
	for k := range n {
		a0 := int64(0)
		if k < len(diff0) {
			a0 = diff0[k]
		}
		ts, err = e.Step(flips(a0, same1))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case k < len(diff0)-1:
			if ts.StepType[0] != tensorbuf.Mid || ts.Reward[0] != -1 || ts.Discount[0] != 1 {
				t.Fatalf("step %d row 0: %v %v %v, want Mid -1 1", k, ts.StepType[0], ts.Reward[0], ts.Discount[0])
			}
		case k == len(diff0)-1:
			if ts.StepType[0] != tensorbuf.Last || ts.Reward[0] != 0 || ts.Discount[0] != 0 {
				t.Fatalf("step %d row 0 reaches its goal: %v %v %v, want Last 0 0", k, ts.StepType[0], ts.Reward[0], ts.Discount[0])
			}
			got := ts.Observation[BitFlipStateName].Float32s()[:n]
			want := goal[:n]
			if !equal(got, want) {
				t.Fatalf("bits %v, goal %v", got, want)
			}
		case k == len(diff0):
			if ts.StepType[0] != tensorbuf.First || ts.Reward[0] != 0 || ts.Discount[0] != 1 {
				t.Fatalf("step %d row 0 after the goal: %v %v %v, want First 0 1", k, ts.StepType[0], ts.Reward[0], ts.Discount[0])
			}
		}
		want := tensorbuf.Mid
		if k == n-1 {
			want = tensorbuf.Last // the time limit: truncation
		}
		if ts.StepType[1] != want || ts.Reward[1] != -1 || ts.Discount[1] != 1 {
			t.Fatalf("step %d row 1: %v %v %v, want %v -1 1", k, ts.StepType[1], ts.Reward[1], ts.Discount[1], want)
		}
	}
	// Bad actions are refused before any row changes.
	f, err := NewBitFlip(2, n, 12)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Step(flips(0, 0)); !errors.Is(err, driver.ErrNotReset) {
		t.Fatalf("step before reset: %v", err)
	}
	start, _ := f.Reset()
	before := append([]float32(nil), start.Observation[BitFlipStateName].Float32s()...)
	for _, bad := range []struct {
		a   map[string]*tensor.Dense
		row int
	}{{flips(n, 0), 0}, {flips(0, -1), 1}} {
		var re *driver.RowError
		if _, err := f.Step(bad.a); !errors.Is(err, driver.ErrSpec) || !errors.As(err, &re) || re.Row != bad.row {
			t.Fatalf("bad action %v: %v", bad.a, err)
		}
	}
	if _, err := f.Step(map[string]*tensor.Dense{}); !errors.Is(err, driver.ErrSpec) {
		t.Fatalf("missing action: %v", err)
	}
	if got := f.Current().Observation[BitFlipStateName].Float32s(); !equal(got, before) {
		t.Fatalf("a refused step changed the bits: %v, was %v", got, before)
	}
	if _, err := NewBitFlip(0, 3, 1); !errors.Is(err, driver.ErrConfig) {
		t.Fatalf("no rows: %v", err)
	}
	if _, err := NewBitFlip(1, 0, 1); !errors.Is(err, driver.ErrConfig) {
		t.Fatalf("no bits: %v", err)
	}
	if BitFlipReward([]float64{1, 0}, []float64{1, 0}) != 0 || BitFlipReward([]float64{1, 0}, []float64{1, 1}) != -1 ||
		!BitFlipDone([]float64{0}, []float64{0}) || BitFlipDone([]float64{0}, []float64{1}) {
		t.Fatal("reward or done function")
	}
}

// collectBitFlip fills a buffer with random-policy episodes of the
// 15-bit environment.
func collectBitFlip(t *testing.T, envs, steps int) *tensorbuf.Buffer {
	t.Helper()
	env, err := NewBitFlip(envs, 15, 1)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := driver.NewRandomPolicy(env.ActionSpec(), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tensorbuf.New(tensorbuf.Config{
		NumEnvs: envs, Capacity: steps + 8, Seed: 3,
		Fields: append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	write := driver.ObserverFunc(func(tr *driver.Trajectory) error {
		vals := make(map[string]*tensor.Dense, 3)
		for k, v := range tr.Observation {
			vals[k] = v
		}
		for k, v := range tr.Action {
			vals[k] = v
		}
		return w.Add(&tensorbuf.Step{StepType: tr.StepType, NextStepType: tr.NextStepType, Reward: tr.Reward, Discount: tr.Discount, Values: vals})
	})
	d, err := driver.NewStepDriver(env, policy, envs*steps, driver.WithObservers(write), driver.WithMaxIterations(steps))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// successFraction returns the fraction of transitions with the success
// reward 0, read through Host so that it also holds for device tensors.
func successFraction(t *testing.T, tr *tensorbuf.Transitions) (frac float64, n int) {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	rew := h.Reward.Float32s()
	ok := 0
	for _, r := range rew {
		if r == 0 {
			ok++
		}
	}
	return float64(ok) / float64(len(rew)), len(rew)
}

// TestBitFlipHindsightRaisesSuccess is the HER paper's motivating
// experiment on the data side: with 15 bits and a random policy, almost no
// stored transition carries the success reward, while relabeling with
// future goals turns a large fraction of sampled transitions into
// successes.
func TestBitFlipHindsightRaisesSuccess(t *testing.T) {
	const envs, steps, batch = 16, 400, 8192
	b := collectBitFlip(t, envs, steps)
	plain, err := b.SampleTransitions(batch)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := successFraction(t, plain)
	t.Logf("no relabeling: %.4f of %d sampled transitions have reward 0", base, batch)
	if base > 0.005 {
		t.Fatalf("success fraction without relabeling %.4f, want near 0", base)
	}
	cfg := tensorbuf.HindsightConfig{
		AchievedGoal: tensorbuf.GoalRef{Field: BitFlipStateName, Indices: seq(15)},
		DesiredGoal:  tensorbuf.GoalRef{Field: BitFlipGoalName, Indices: seq(15)},
		Reward:       BitFlipReward, IsDone: BitFlipDone,
		NumGoals: 4, Seed: 4,
	}
	for _, tc := range []struct {
		strategy tensorbuf.GoalStrategy
		mode     tensorbuf.RelabelMode
		min      float64
	}{
		// Future goals: a transition t of a 15-step episode draws its goal
		// from 15-t observations, one of which is its own next one: a
		// success with probability about H(15)/15 = 0.22 per relabeled
		// transition (more when flips undo each other), and 4 of 5
		// transitions are relabeled.
		{tensorbuf.GoalFuture, tensorbuf.RelabelAtSample, 0.15},
		{tensorbuf.GoalFuture, tensorbuf.RelabelAtEpisodeEnd, 0.15},
		// Final goals only match the last transition: about 1/15.
		{tensorbuf.GoalFinal, tensorbuf.RelabelAtSample, 0.04},
		{tensorbuf.GoalEpisode, tensorbuf.RelabelAtSample, 0.05},
	} {
		c := cfg
		c.Strategy, c.Mode = tc.strategy, tc.mode
		hs, err := tensorbuf.NewHindsight(b, c)
		if err != nil {
			t.Fatal(err)
		}
		if tc.mode == tensorbuf.RelabelAtEpisodeEnd {
			if _, err := hs.Generate(); err != nil {
				t.Fatal(err)
			}
		}
		ht := new(tensorbuf.HindsightTransitions)
		if err := hs.SampleInto(ht, batch); err != nil {
			t.Fatal(err)
		}
		frac, _ := successFraction(t, &ht.Transitions)
		rel := 0
		for _, r := range ht.Relabeled {
			if r {
				rel++
			}
		}
		mode := "at sample time"
		if tc.mode == tensorbuf.RelabelAtEpisodeEnd {
			mode = "at episode end"
		}
		t.Logf("%s goals, relabeled %s (k=4): %.4f of %d sampled transitions have reward 0 (%.3f relabeled)",
			tc.strategy, mode, frac, batch, float64(rel)/batch)
		if frac < tc.min || frac < 20*base {
			t.Fatalf("%s %s: success fraction %.4f, want at least %.2f", tc.strategy, mode, frac, tc.min)
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
