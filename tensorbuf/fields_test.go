package tensorbuf_test

import (
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// hostTimeFields are the two row kinds of the host-time benchmark:
// low-dimensional (an 8-float observation and an action) and 3 KB rows
// (a 3072-byte image and an action).
var hostTimeFields = map[string][]tensorbuf.Field{
	"low-dim": {
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{8}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	},
	"3KB": {
		{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{3072}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	},
}

// fullStep returns a step of every row of a writer over rows envs.
func fullStep(fields []tensorbuf.Field, rows int) *tensorbuf.Step {
	s := &tensorbuf.Step{
		StepType:     make([]tensorbuf.StepType, rows),
		NextStepType: make([]tensorbuf.StepType, rows),
		Reward:       make([]float32, rows),
		Discount:     make([]float32, rows),
		Values:       map[string]*tensor.Dense{},
	}
	for i := range rows {
		s.StepType[i], s.NextStepType[i], s.Discount[i] = tensorbuf.Mid, tensorbuf.Mid, 1
	}
	for _, f := range fields {
		shape := append([]int{rows}, f.Shape...)
		s.Values[f.Name] = tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(shape...))
	}
	return s
}
