package tensorbuf_test

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// One env per actor: a writer of one row reuses one Step, with its
// fields by position (Buffer.Fields order) instead of by name, and
// overwrites the step's values before each Add.
func ExampleStep_fields() {
	b, err := tensorbuf.New(tensorbuf.Config{
		NumEnvs:  1,
		Capacity: 8,
		Fields: []tensorbuf.Field{
			{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
			{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
		},
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		panic(err)
	}
	obs, act := make([]float32, 2), make([]int32, 1)
	s := &tensorbuf.Step{
		StepType:     make([]tensorbuf.StepType, 1),
		NextStepType: make([]tensorbuf.StepType, 1),
		Reward:       make([]float32, 1),
		Discount:     make([]float32, 1),
		Fields: []*tensor.Dense{ // b.Fields(): obs, then action
			tensor.New(tensor.WithShape(1, 2), tensor.WithBacking(obs)),
			tensor.New(tensor.WithShape(1), tensor.WithBacking(act)),
		},
	}
	for t := range 4 {
		s.StepType[0], s.NextStepType[0] = tensorbuf.Mid, tensorbuf.Mid
		if t == 0 {
			s.StepType[0] = tensorbuf.First
		}
		s.Reward[0], s.Discount[0] = float32(t), 1
		obs[0], obs[1], act[0] = float32(t), float32(10*t), int32(t%2)
		if err := w.Add(s); err != nil {
			panic(err)
		}
	}
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
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
	fmt.Println("action:", h.Action["action"].Data())
	fmt.Println("reward:", h.Reward.Data())
	// Output:
	// obs: [0 0 1 10 2 20]
	// action: [0 1 0]
	// reward: [0 1 2]
}
