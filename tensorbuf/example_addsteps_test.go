package tensorbuf_test

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Write three steps of two rows in one call: the values are time-major
// (step 0 of rows 0 and 1, then step 1, ...), as k successive Adds would
// take them.
func ExampleWriter_AddSteps() {
	b, err := tensorbuf.New(tensorbuf.Config{
		NumEnvs:  2,
		Capacity: 4,
		Fields:   []tensorbuf.Field{{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32}},
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		panic(err)
	}
	m := tensorbuf.Mid
	err = w.AddSteps(&tensorbuf.Step{
		StepType:     []tensorbuf.StepType{tensorbuf.First, tensorbuf.First, m, m, m, m},
		NextStepType: []tensorbuf.StepType{m, m, m, m, m, m},
		Reward:       []float32{0, 0, 1, 1, 2, 2},
		Discount:     []float32{1, 1, 1, 1, 1, 1},
		Values: map[string]*tensor.Dense{
			"obs": tensor.New(tensor.WithShape(6), tensor.WithBacking([]float32{10, 20, 11, 21, 12, 22})),
		},
	}, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println("cursors:", b.Cursor(0), b.Cursor(1))
	exp, err := b.AllExperiences(tensorbuf.ExportBatch) // time-major, env-minor
	if err != nil {
		panic(err)
	}
	defer exp[0].Release()
	h, err := exp[0].Host()
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("obs:", h.Observation["obs"].Data())
	fmt.Println("next obs:", h.NextObservation["obs"].Data())
	// Output:
	// cursors: 3 3
	// obs: [10 20 11 21]
	// next obs: [11 21 12 22]
}
