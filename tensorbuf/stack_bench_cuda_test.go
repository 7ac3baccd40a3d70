//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// BenchmarkFrameStackDevice times stacked table transitions on the gpu
// backend (issue 45): DQN's Atari batch (B=32) and B=256 of 84x84 uint8
// frames stacked over K=4, from a DeviceSelection table (drawn, checked
// and stacked on the device: kernels/stack_gather.cu), from a
// host-selected table of the same items (the stacks gathered by one
// window-gather launch each), and the same device-selected sample
// unstacked, each call waited for (call + Sync). Episodes are 100 steps.
// Rings hold 65,536 steps (64 rows of 1,024), 1,024 with -short (smoke
// runs on the stand-in driver, where the figures mean nothing). Run it on
// a GPU with
//
//	tensorbuf.test -test.run '^$' -test.bench '^BenchmarkFrameStackDevice$' -test.benchtime 2000x
func BenchmarkFrameStackDevice(b *testing.B) {
	g, err := gpu.New()
	if err != nil {
		b.Skipf("no gpu backend: %v", err)
	}
	defer g.Close()
	envs, capacity := 64, 1024
	if testing.Short() {
		envs, capacity = 16, 64
	}
	fields := []tensorbuf.Field{
		{Name: "frame", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{84, 84}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
	}
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 1, Backend: g})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		b.Fatal(err)
	}
	step := fullStep(fields, envs)
	for t := range capacity {
		for r := range envs {
			st, next := tensorbuf.Mid, tensorbuf.Mid
			switch (t + 7*r) % 100 {
			case 0:
				st = tensorbuf.First
			case 98:
				next = tensorbuf.Last
			case 99:
				st, next = tensorbuf.Last, tensorbuf.First
			}
			step.StepType[r], step.NextStepType[r] = st, next
		}
		if err := w.Add(step); err != nil {
			b.Fatal(err)
		}
	}
	tables := map[bool]*tensorbuf.Table{}
	for _, dev := range []bool{true, false} {
		tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint(dev), Selector: tensorbuf.Uniform, Seed: 5, DeviceSelection: dev})
		if err != nil {
			b.Fatal(err)
		}
		for r := range envs {
			for s := range int64(capacity - 1) {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 2, Priority: 1}); err != nil {
					b.Fatal(err)
				}
			}
		}
		tables[dev] = tbl
	}
	ctx := context.Background()
	stacked := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: []tensorbuf.FrameStack{{Field: "frame", K: 4}}}
	plain := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1}
	for _, n := range []int{32, 256} {
		for _, bc := range []struct {
			name string
			dev  bool
			opt  tensorbuf.NStepOptions
		}{
			{"device-selected/stacked", true, stacked},
			{"host-selected/stacked", false, stacked},
			{"device-selected/unstacked", true, plain},
		} {
			b.Run(fmt.Sprintf("B%d/%s", n, bc.name), func(b *testing.B) {
				tr := new(tensorbuf.TableTransitions)
				defer tr.Release()
				op := func() {
					if err := tables[bc.dev].SampleTransitionsInto(ctx, tr, n, bc.opt); err != nil {
						b.Fatal(err)
					}
					if err := g.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				op()
				b.ResetTimer()
				for range b.N {
					op()
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
			})
		}
	}
}
