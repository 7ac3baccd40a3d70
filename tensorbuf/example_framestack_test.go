package tensorbuf_test

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Frames are stored once; a DQN batch gets them stacked over the last 4
// steps, zeros before the episode's first frame (see FrameStack).
func ExampleFrameStack() {
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 1000, Fields: []tensorbuf.Field{
		{Name: "frame", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{84, 84}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
	}})
	if err != nil {
		panic(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		panic(err)
	}
	for t := range 10 { // one episode: First, 8 Mid, then its Last step
		st, next := tensorbuf.Mid, tensorbuf.Mid
		if t == 0 {
			st = tensorbuf.First
		}
		if t == 8 {
			next = tensorbuf.Last
		}
		if t == 9 {
			st, next = tensorbuf.Last, tensorbuf.First
		}
		frame := make([]uint8, 84*84)
		frame[0] = uint8(t + 1)
		err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{st}, NextStepType: []tensorbuf.StepType{next},
			Reward: []float32{1}, Discount: []float32{1},
			Values: map[string]*tensor.Dense{
				"frame":  tensor.New(tensor.WithShape(1, 84, 84), tensor.WithBacking(frame)),
				"action": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{0})),
			},
		})
		if err != nil {
			panic(err)
		}
	}
	opt := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: []tensorbuf.FrameStack{{Field: "frame", K: 4}}}
	tr, err := buf.SampleNStep(32, opt)
	if err != nil {
		panic(err)
	}
	defer tr.Release()
	fmt.Println(tr.Observation["frame"].Shape(), tr.NextObservation["frame"].Shape())
	exp, err := buf.AllNStepExperiences(tensorbuf.ExportBatch, opt)
	if err != nil {
		panic(err)
	}
	defer exp[0].Release()
	h, err := exp[0].Host() // host memory in every build (device memory in cuda builds)
	if err != nil {
		panic(err)
	}
	first := h.Observation["frame"].Data().([]uint8) // [9, 1, 4, 84, 84]: transition 0 is step 0
	for f := range 4 {
		fmt.Print(first[f*84*84], " ")
	}
	fmt.Println()
	// Output:
	// (32, 4, 84, 84) (32, 4, 84, 84)
	// 0 0 0 1
}
