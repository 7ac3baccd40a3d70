package tensorbuf_test

import (
	"context"
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// exampleBuffer returns a buffer of 2 env rows with a 2-float observation
// and an int32 action, holding one 3-step episode per row (F, M, M with a
// terminal last step) and its boundary step.
func exampleBuffer() *tensorbuf.Buffer {
	b, err := tensorbuf.New(tensorbuf.Config{
		NumEnvs:  2,
		Capacity: 8,
		Fields: []tensorbuf.Field{
			{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
			{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
		},
	})
	if err != nil {
		panic(err)
	}
	w, err := b.NewWriter() // owns both rows
	if err != nil {
		panic(err)
	}
	types := []struct{ st, next tensorbuf.StepType }{
		{tensorbuf.First, tensorbuf.Mid}, {tensorbuf.Mid, tensorbuf.Mid},
		{tensorbuf.Mid, tensorbuf.Last}, {tensorbuf.Last, tensorbuf.First},
	}
	for t, ty := range types {
		discount := float32(1)
		if ty.next == tensorbuf.Last {
			discount = 0 // terminated
		}
		err := w.Add(&tensorbuf.Step{
			StepType:     []tensorbuf.StepType{ty.st, ty.st},
			NextStepType: []tensorbuf.StepType{ty.next, ty.next},
			Reward:       []float32{1, 1},
			Discount:     []float32{discount, discount},
			Values: map[string]*tensor.Dense{
				"obs":    tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{float32(t), 0, float32(t), 1})),
				"action": tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{int32(t), int32(t)})),
			},
		})
		if err != nil {
			panic(err)
		}
	}
	return b
}

// Fill a buffer, then sample windows of 4 steps: each row holds exactly
// one, its whole episode up to the boundary step.
func Example() {
	b := exampleBuffer()
	defer b.Close()
	batch, err := b.SampleSequences(3, 4, tensorbuf.SequenceOptions{})
	if err != nil {
		panic(err)
	}
	defer batch.Release()  // frees its memory now; tensors taken from it are emptied
	h, err := batch.Host() // a copy on the cpu backend, a download on the GPU
	if err != nil {
		panic(err)
	}
	defer h.Release() // a copy owns memory of its own
	fmt.Println("obs:", h.Fields["obs"].Shape(), "mask:", h.Mask.Shape())
	fmt.Println("step types:", h.StepType.Data())
	// Output:
	// obs: (3, 4, 2) mask: (3, 4)
	// step types: [0 1 1 2 0 1 1 2 0 1 1 2]
}

// Tables hold items that observers create; sampling returns a batch with
// keys and probabilities for priority updates.
func ExampleTable() {
	b := exampleBuffer()
	defer b.Close()
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.FIFO, MaxTimesSampled: 1})
	if err != nil {
		panic(err)
	}
	// Items as TF-Agents' padded observer writes them: the last window of
	// the episode [M L P] holds 2 real steps and one pad step.
	for row := range 2 {
		if _, err := tbl.Insert(tensorbuf.Item{Row: row, Start: 2, Len: 2, Pad: 1, Priority: 1}); err != nil {
			panic(err)
		}
	}
	batch, err := tbl.Sample(context.Background(), 2)
	if err != nil {
		panic(err)
	}
	defer batch.Release()
	h, err := batch.Host()
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("items:", len(h.Keys), "left:", tbl.Size())
	fmt.Println("step types:", h.StepType.Data())
	fmt.Println("mask:", h.Mask.Data())
	// Output:
	// items: 2 left: 0
	// step types: [1 2 2 1 2 2]
	// mask: [true true false true true false]
}

// Export every transition as one batch, as MATLAB's allExperiences with
// ConcatenateMode "batch" does: IsDone is 1 where the episode terminated.
func ExampleBuffer_AllExperiences() {
	b := exampleBuffer()
	defer b.Close()
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
	fmt.Println("observation:", h.Observation["obs"].Shape())
	fmt.Println("rows:", h.Rows, "steps:", h.Steps)
	fmt.Println("is_done:", h.IsDone.Data())
	fmt.Println("next obs:", h.NextObservation["obs"].Data())
	// Output:
	// observation: (6, 1, 2)
	// rows: [0 1 0 1 0 1] steps: [0 0 1 1 2 2]
	// is_done: [0 0 0 0 1 1]
	// next obs: [1 0 1 1 2 0 2 1 3 0 3 1]
}
