package tensorbuf_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// A recurrent pixel agent samples sequences whose every step carries the
// last 4 frames, from frames stored once; the steps of a window that
// crosses into a new episode start again from zeros (see
// SequenceOptions.Stack).
func ExampleSequenceOptions_stack() {
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 100, Fields: []tensorbuf.Field{
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
	// Two episodes: steps 0..5 (5 is the boundary step), then 6..11.
	types := []tensorbuf.StepType{tensorbuf.First, tensorbuf.Mid, tensorbuf.Mid, tensorbuf.Mid, tensorbuf.Mid, tensorbuf.Last}
	for t := range 12 {
		st := types[t%6]
		next := tensorbuf.First
		if t%6 < 5 {
			next = types[t%6+1]
		}
		frame := make([]uint8, 84*84)
		frame[0] = uint8(t + 1) // frame t shows t+1; a zero frame shows 0
		if err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{st}, NextStepType: []tensorbuf.StepType{next},
			Reward: []float32{1}, Discount: []float32{1},
			Values: map[string]*tensor.Dense{
				"frame":  tensor.New(tensor.WithShape(1, 84, 84), tensor.WithBacking(frame)),
				"action": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{0})),
			},
		}); err != nil {
			panic(err)
		}
	}
	opt := tensorbuf.SequenceOptions{Stack: []tensorbuf.FrameStack{{Field: "frame", K: 4}}}
	bt, err := buf.SampleSequences(32, 8, opt)
	if err != nil {
		panic(err)
	}
	defer bt.Release()
	h, err := bt.Host() // host memory in every build (device memory in cuda builds)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Fields["frame"].Shape()) // [n, L, K, 84, 84]
	frames := h.Fields["frame"].Data().([]uint8)
	for i, it := range h.Items {
		if it.Start != 2 {
			continue
		}
		for j := range 8 { // window of steps 2..9: the new episode starts at step 6
			var stack [4]uint8
			for f := range stack {
				stack[f] = frames[((i*8+j)*4+f)*84*84]
			}
			fmt.Println(stack)
		}
		break
	}
	// Output:
	// (32, 8, 4, 84, 84)
	// [0 1 2 3]
	// [1 2 3 4]
	// [2 3 4 5]
	// [3 4 5 6]
	// [0 0 0 7]
	// [0 0 7 8]
	// [0 7 8 9]
	// [7 8 9 10]
}

// stackedSequences is the snippet of docs/library.md's frame stacking
// section (TestFrameStackSequenceSnippet runs it).
func stackedSequences(ctx context.Context, buf *tensorbuf.Buffer, table *tensorbuf.Table, bt *tensorbuf.Batch) error {
	stack := []tensorbuf.FrameStack{{Field: "frame", K: 4}}
	// 32 windows of 8 steps: bt.Fields["frame"] is [32, 8, 4, ...frame].
	if err := buf.SampleSequencesInto(bt, 32, 8, tensorbuf.SequenceOptions{Stack: stack}); err != nil {
		return err
	}
	// A table of sequence items, the same layout; mask out !bt.Valid[i].
	return table.SampleStackedInto(ctx, bt, 32, stack)
}

// TestFrameStackSequenceSnippet runs docs/library.md's snippet.
func TestFrameStackSequenceSnippet(t *testing.T) {
	b := newStackBuffer(t, nil, 2, 16)
	scripts := []stackRow{parseStackRow("F M M M M L F M M M M M M"), parseStackRow("F M M M M M M M M M M M")}
	writeStackRows(t, b, scripts)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "seq", Selector: tensorbuf.Uniform})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Insert(tensorbuf.Item{Row: 1, Start: 2, Len: 8, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	if err := stackedSequences(context.Background(), b, tbl, bt); err != nil {
		t.Fatal(err)
	}
	checkSeqBatch(t, "snippet", hostSeqBatch(t, bt), scripts, 16, 4)
}
