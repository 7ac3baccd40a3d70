package tensorbuf_test

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// BenchmarkFrameStackSequence times a direct sample of B=32 windows of
// L=8 steps of Atari frames (84x84 uint8) with the frames stacked over
// K=4, against the same sample unstacked (K=1 moves each frame once; K=4
// moves four) and a table sample of 8-step items stacked, from 8 rows of
// 2,048 steps of episodes of 100 steps.
func BenchmarkFrameStackSequence(b *testing.B) {
	const rows, capacity, n, l = 8, 2048, 32, 8
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Seed: 1, Fields: []tensorbuf.Field{
		{Name: "frame", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{84, 84}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		b.Fatal(err)
	}
	frames := make([]uint8, rows*84*84)
	st, next := make([]tensorbuf.StepType, rows), make([]tensorbuf.StepType, rows)
	step := &tensorbuf.Step{
		StepType: st, NextStepType: next, Reward: make([]float32, rows), Discount: make([]float32, rows),
		Values: map[string]*tensor.Dense{
			"frame":  tensor.New(tensor.WithShape(rows, 84, 84), tensor.WithBacking(frames)),
			"action": tensor.New(tensor.WithShape(rows), tensor.WithBacking(make([]int32, rows))),
		},
	}
	for t := range capacity {
		for r := range rows {
			st[r], next[r], step.Discount[r] = tensorbuf.Mid, tensorbuf.Mid, 1
			switch (t + r) % 100 {
			case 0:
				st[r] = tensorbuf.First
			case 98:
				next[r] = tensorbuf.Last
			case 99:
				st[r], next[r] = tensorbuf.Last, tensorbuf.First
			}
		}
		if err := w.Add(step); err != nil {
			b.Fatal(err)
		}
	}
	tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "seq", Selector: tensorbuf.Uniform, Seed: 2})
	if err != nil {
		b.Fatal(err)
	}
	for r := range rows {
		for p := buf.Oldest(r); p+l <= buf.Cursor(r); p += 4 {
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: l, Priority: 1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, k := range []int{0, 1, 4} {
		opt := tensorbuf.SequenceOptions{}
		if k > 0 {
			opt.Stack = []tensorbuf.FrameStack{{Field: "frame", K: k}}
		}
		b.Run(fmt.Sprintf("direct K=%d", k), func(b *testing.B) {
			bt := new(tensorbuf.Batch)
			defer bt.Release()
			for b.Loop() {
				if err := buf.SampleSequencesInto(bt, n, l, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(n * l * max(k, 1) * 84 * 84))
		})
	}
	b.Run("table K=4", func(b *testing.B) {
		bt := new(tensorbuf.Batch)
		defer bt.Release()
		stack := []tensorbuf.FrameStack{{Field: "frame", K: 4}}
		for b.Loop() {
			if err := tbl.SampleStackedInto(b.Context(), bt, n, stack); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(n * l * 4 * 84 * 84))
	})
}
