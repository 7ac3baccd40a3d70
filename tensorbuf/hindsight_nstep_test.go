package tensorbuf_test

import (
	"errors"
	"math"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

func nstepLine(s int64, relabeled bool, g float64, n int, gamma float64) hsExp {
	cursor := int64(len(lineSteps))
	kEnv := int64(0)
	for kEnv < int64(n) && s+kEnv+1 < cursor {
		kEnv++
		if lineSteps[s+kEnv-1].next == tensorbuf.Last {
			break
		}
	}
	k, sum, pow := kEnv, 0.0, 1.0
	terminated := false
	for j := range kEnv {
		r := float64(lineSteps[s+j].reward)
		if relabeled {
			r = float64(lineReward([]float64{float64(lineSteps[s+j+1].pos)}, []float64{g}))
		}
		sum = float64(sum + float64(pow*r))
		pow = float64(pow * gamma)
		if relabeled && float64(lineSteps[s+j+1].pos) == g {
			k, terminated = j+1, true
			break
		}
	}
	last := lineSteps[s+k-1]
	done := 0.0
	switch {
	case terminated:
		done = 1
	case last.next == tensorbuf.Last && last.discount > 0:
		done = 2
	case last.next == tensorbuf.Last && !relabeled:
		done = 1
	}
	disc := float32(pow)
	if done == 1 {
		disc = 0
	}
	e := hsExp{step: s, relabeled: relabeled, goal: float64(lineSteps[s].goal), nextGoal: float64(lineSteps[s+k].goal),
		reward: float64(float32(sum)), discount: float64(disc), done: done,
		pos: float64(lineSteps[s].pos), nextPos: float64(lineSteps[s+k].pos), marker: float64(100 + s)}
	if relabeled {
		e.goal, e.nextGoal = g, g
	}
	return e
}

func TestHindsightNStepExact(t *testing.T) {
	const n, gamma = 3, 0.5
	rl := func(s int64, g float64) hsExp { return nstepLine(s, true, g, n, gamma) }
	re := func(s int64) hsExp { return nstepLine(s, false, 0, n, gamma) }
	// Hand-computed: reward, discount, IsDone and the step of the next
	// observation.
	for _, tc := range []struct {
		got              hsExp
		reward, discount float64
		done             float64
		nextPos          float64
	}{
		{re(0), -1.75, 0.125, 2, 3},
		{re(1), -1.5, 0.25, 2, 3},
		{re(4), -1, 0, 1, 12},
		{re(7), -1, 0.5, 0, 21},      // truncated at the cursor
		{rl(0, 3), -1.5, 0, 1, 3},    // reaches goal 3 at the third step
		{rl(1, 1), -1.5, 0.25, 2, 3}, // never reaches 1: truncated like the real one
		{rl(4, 11), 0, 0, 1, 11},     // reaches 11 at once: k = 1
		{rl(5, 11), -1, 0.5, 0, 12},  // the real episode terminated; goal 11 did not
	} {
		x := tc.got
		if x.reward != tc.reward || x.discount != tc.discount || x.done != tc.done || x.nextPos != tc.nextPos {
			t.Fatalf("model %+v, want reward %v discount %v done %v next pos %v", x, tc.reward, tc.discount, tc.done, tc.nextPos)
		}
	}
	for _, be := range nstepBackends {
		for _, strategy := range []tensorbuf.GoalStrategy{tensorbuf.GoalFinal, tensorbuf.GoalEpisode} {
			t.Run(be.name+"/"+strategy.String(), func(t *testing.T) {
				b, _ := newGoalBuffer(t, be.be(), 16, lineSteps)
				cfg := lineConfig(strategy, 20, tensorbuf.RelabelAtEpisodeEnd)
				cfg.NStep = tensorbuf.NStepOptions{Horizon: n, DiscountFactor: gamma}
				hs, err := tensorbuf.NewHindsight(b, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := hs.Generate(); err != nil {
					t.Fatal(err)
				}
				exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[[2]float64]bool{}
				for i, x := range readHindsight(t, exp[0], rel) {
					if want := nstepLine(x.step, x.relabeled, x.goal, n, gamma); x != want {
						t.Fatalf("experience %d: %+v, want %+v", i, x, want)
					}
					if x.relabeled {
						seen[[2]float64{float64(x.step), x.goal}] = true
					}
				}
				if strategy == tensorbuf.GoalEpisode && (!seen[[2]float64{1, 1}] || !seen[[2]float64{5, 11}]) {
					t.Fatalf("20 episode goals per transition missed (1, 1) or (5, 11): %v", seen)
				}
				cfg.Mode = tensorbuf.RelabelAtSample
				at, err := tensorbuf.NewHindsight(b, cfg)
				if err != nil {
					t.Fatal(err)
				}
				ht := new(tensorbuf.HindsightTransitions)
				for range 10 {
					if err := at.SampleInto(ht, 30); err != nil {
						t.Fatal(err)
					}
					for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
						if want := nstepLine(x.step, x.relabeled, x.goal, n, gamma); x != want {
							t.Fatalf("sample %d: %+v, want %+v", i, x, want)
						}
					}
				}
			})
		}
	}
	b, _ := newGoalBuffer(t, nil, 16, lineSteps)
	for _, opt := range []tensorbuf.NStepOptions{{Horizon: -1}, {Horizon: 2, DiscountFactor: 2}, {Horizon: 2, DiscountFactor: math.NaN()}} {
		cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtSample)
		cfg.NStep = opt
		if _, err := tensorbuf.NewHindsight(b, cfg); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Fatalf("n-step %+v: %v", opt, err)
		}
	}
}
