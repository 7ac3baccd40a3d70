package tensorbuf_test

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Export two-step returns with gamma 0.5: every reward of the example
// buffer is 1 and each episode terminates after its third transition, so
// the first transition sums 1 + 0.5 and bootstraps with gamma^2, and the
// later ones stop at the termination with discount 0.
func ExampleBuffer_AllNStepExperiences() {
	b := exampleBuffer()
	defer b.Close()
	exp, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.5})
	if err != nil {
		panic(err)
	}
	defer exp[0].Release()
	h, err := exp[0].Host()
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("steps:", h.Steps)
	fmt.Println("reward:", h.Reward.Data())
	fmt.Println("discount:", h.Discount.Data())
	fmt.Println("is_done:", h.IsDone.Data())
	fmt.Println("next obs:", h.NextObservation["obs"].Data())
	// Output:
	// steps: [0 0 1 1 2 2]
	// reward: [1.5 1.5 1.5 1.5 1 1]
	// discount: [0.25 0.25 0 0 0 0]
	// is_done: [0 0 1 1 1 1]
	// next obs: [2 0 2 1 3 0 3 1 3 0 3 1]
}

// Relabel a walker's episode with its final position as the goal, at
// episode end, as MATLAB's generateHindsightExperiences does; the export
// then holds each real transition followed by its relabeled one.
func ExampleHindsight() {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 8, Fields: []tensorbuf.Field{
		// [position, goal]
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
	}})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	w, _ := b.NewWriter()
	// The walker moves 0 -> 1 -> 2 towards goal 5 and hits the time limit.
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	for i, st := range [][2]tensorbuf.StepType{{F, M}, {M, L}, {L, F}} {
		err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{st[0]}, NextStepType: []tensorbuf.StepType{st[1]},
			Reward: []float32{-1}, Discount: []float32{1},
			Values: map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{float32(i), 5}))},
		})
		if err != nil {
			panic(err)
		}
	}
	reached := func(ach, des []float64) bool { return ach[0] == des[0] }
	hs, err := tensorbuf.NewHindsight(b, tensorbuf.HindsightConfig{
		AchievedGoal: tensorbuf.GoalRef{Field: "obs", Indices: []int{0}},
		DesiredGoal:  tensorbuf.GoalRef{Field: "obs", Indices: []int{1}},
		Reward: func(ach, des []float64) float32 {
			if reached(ach, des) {
				return 0
			}
			return -1
		},
		IsDone:   reached,
		Strategy: tensorbuf.GoalFinal,
		NumGoals: 1,
		Mode:     tensorbuf.RelabelAtEpisodeEnd,
	})
	if err != nil {
		panic(err)
	}
	n, _ := hs.Generate()
	exp, relabeled, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		panic(err)
	}
	defer exp[0].Release()
	h, err := exp[0].Host()
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("made:", n, "relabeled:", relabeled)
	fmt.Println("obs:", h.Observation["obs"].Data())
	fmt.Println("reward:", h.Reward.Data())
	fmt.Println("is_done:", h.IsDone.Data())
	// Output:
	// made: 2 relabeled: [false true false true]
	// obs: [0 5 0 2 1 5 1 2]
	// reward: [-1 -1 -1 0]
	// is_done: [0 0 2 1]
}
