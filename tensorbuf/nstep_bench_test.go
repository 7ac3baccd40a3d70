package tensorbuf_test

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// benchGoalBuffer fills rows x capacity steps of 3,072-byte uint8
// observations plus a float32 [position, goal] field, in episodes of 16
// transitions and their boundary steps.
func benchGoalBuffer(b *testing.B, be tensorbuf.Backend, rows, capacity int) *tensorbuf.Buffer {
	b.Helper()
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Seed: 1, Backend: be, Fields: []tensorbuf.Field{
		{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{32, 32, 3}},
		{Name: "goal", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int32},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Close() })
	w, err := buf.NewWriter()
	if err != nil {
		b.Fatal(err)
	}
	pix := tensor.New(tensor.WithShape(rows, 32, 32, 3), tensor.Of(tensor.Uint8))
	act := tensor.New(tensor.WithShape(rows), tensor.Of(tensor.Int32))
	goal := make([]float32, 2*rows)
	s := &tensorbuf.Step{
		StepType: make([]tensorbuf.StepType, rows), NextStepType: make([]tensorbuf.StepType, rows),
		Reward: make([]float32, rows), Discount: make([]float32, rows),
		Values: map[string]*tensor.Dense{"pix": pix, "act": act, "goal": tensor.New(tensor.WithShape(rows, 2), tensor.WithBacking(goal))},
	}
	for t := range capacity {
		st, nt := tensorbuf.Mid, tensorbuf.Mid
		switch t % 17 {
		case 0:
			st = tensorbuf.First
		case 15:
			nt = tensorbuf.Last
		case 16:
			st, nt = tensorbuf.Last, tensorbuf.First
		}
		for r := range rows {
			s.StepType[r], s.NextStepType[r], s.Reward[r], s.Discount[r] = st, nt, -1, 1
			goal[2*r], goal[2*r+1] = float32(t%17), 20
		}
		if err := w.Add(s); err != nil {
			b.Fatal(err)
		}
	}
	return buf
}

// BenchmarkNStepAndHindsight compares, in one run, sampling 256 one-step
// transitions with n-step transitions (the backend's kernel, and the
// gather-and-sum fallback of backends without one) and hindsight samples,
// from a 65,536-step buffer of 3 KB observations.
func BenchmarkNStepAndHindsight(b *testing.B) {
	const batch = 256
	buf := benchGoalBuffer(b, nil, 4, 16384)
	plain := benchGoalBuffer(b, plainBackend{cpu.New()}, 4, 16384)
	tr := new(tensorbuf.Transitions)
	b.Run("one-step", func(b *testing.B) {
		for b.Loop() {
			if err := buf.SampleTransitionsInto(tr, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{3, 10} {
		for _, c := range []struct {
			name string
			buf  *tensorbuf.Buffer
		}{{"kernel", buf}, {"fallback", plain}} {
			b.Run(fmt.Sprintf("n-step/n=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					if err := c.buf.SampleNStepInto(tr, batch, tensorbuf.NStepOptions{Horizon: n, DiscountFactor: 0.99}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	cfg := tensorbuf.HindsightConfig{
		AchievedGoal: tensorbuf.GoalRef{Field: "goal", Indices: []int{0}},
		DesiredGoal:  tensorbuf.GoalRef{Field: "goal", Indices: []int{1}},
		Reward:       lineReward, IsDone: lineDone,
		Strategy: tensorbuf.GoalFuture, NumGoals: 4, Mode: tensorbuf.RelabelAtSample,
	}
	hs, err := tensorbuf.NewHindsight(buf, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	b.Run("hindsight/at-sample", func(b *testing.B) {
		for b.Loop() {
			if err := hs.SampleInto(ht, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	cfg.Mode = tensorbuf.RelabelAtEpisodeEnd
	he, err := tensorbuf.NewHindsight(buf, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := he.Generate(); err != nil {
		b.Fatal(err)
	}
	b.Run("hindsight/at-episode-end", func(b *testing.B) {
		for b.Loop() {
			if err := he.SampleInto(ht, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
