// Command gosample is the Go half of python/tests/test_go_equal.py: it
// fills a buffer through the Go API with the steps the Python test adds
// (conftest.add_steps: 3 rows, 20 steps, episodes of 5), samples it with
// fixed seeds, and prints every sampled tensor's bytes as JSON, so that
// the test can check that Python's samples equal Go's byte for byte.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

const rows, steps, episode = 3, 20, 5

func main() {
	out, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gosample:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

// raw returns the bytes of a tensor or slice.
func raw(v any) []byte {
	if d, ok := v.(*tensor.Dense); ok {
		v = d.Data()
	}
	rv := reflect.ValueOf(v)
	n := rv.Len() * int(rv.Type().Elem().Size())
	if n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(rv.UnsafePointer()), n)...)
}

func run() (map[string][]byte, error) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: 32, Seed: 11, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	}})
	if err != nil {
		return nil, err
	}
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Prioritized, PriorityExponent: 0.6, Beta: 0.4, Seed: 9})
	if err != nil {
		return nil, err
	}
	obs, err := observer.NewAddTrajectory(b, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "replay", SequenceLength: 2}}})
	if err != nil {
		return nil, err
	}
	for t := range steps {
		tr := &driver.Trajectory{
			StepType: make([]tensorbuf.StepType, rows), NextStepType: make([]tensorbuf.StepType, rows),
			Reward: make([]float32, rows), Discount: make([]float32, rows),
		}
		o := make([]float32, 0, rows*3)
		a := make([]int64, rows)
		for r := range rows {
			st, nst, disc := tensorbuf.Mid, tensorbuf.Mid, float32(1)
			switch k := t % episode; k {
			case 0:
				st = tensorbuf.First
			case episode - 1:
				st, nst = tensorbuf.Last, tensorbuf.First
			case episode - 2:
				nst, disc = tensorbuf.Last, 0
			}
			tr.StepType[r], tr.NextStepType[r], tr.Reward[r], tr.Discount[r] = st, nst, float32(t), disc
			o = append(o, float32(t), float32(r), float32(t*10+r))
			a[r] = int64(t*100 + r)
		}
		tr.Observation = map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(rows, 3), tensor.WithBacking(o))}
		tr.Action = map[string]*tensor.Dense{"action": tensor.New(tensor.WithShape(rows), tensor.WithBacking(a))}
		if err := obs.Observe(tr); err != nil {
			return nil, err
		}
	}
	if err := obs.Flush(); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for i := range 3 {
		tt, err := tb.SampleTransitions(context.Background(), 16, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1})
		if err != nil {
			return nil, err
		}
		p := fmt.Sprintf("table%d/", i)
		out[p+"obs"], out[p+"next_obs"], out[p+"action"] = raw(tt.Observation["obs"]), raw(tt.NextObservation["obs"]), raw(tt.Action["action"])
		out[p+"reward"], out[p+"discount"], out[p+"is_done"] = raw(tt.Reward), raw(tt.Discount), raw(tt.IsDone)
		out[p+"key"], out[p+"weight"] = raw(tt.Keys), raw(tt.Weights)
		prios := make([]float64, len(tt.Keys))
		for j, k := range tt.Keys {
			prios[j] = float64(k%7) + 0.5
		}
		if err := tb.UpdatePriorities(tt.Keys, prios); err != nil {
			return nil, err
		}
	}
	tr, err := b.SampleTransitions(16)
	if err != nil {
		return nil, err
	}
	out["direct/obs"], out["direct/next_obs"], out["direct/step"] = raw(tr.Observation["obs"]), raw(tr.NextObservation["obs"]), raw(tr.Steps)
	seq, err := b.SampleSequences(8, 4, tensorbuf.SequenceOptions{})
	if err != nil {
		return nil, err
	}
	out["seq/obs"], out["seq/step_type"], out["seq/mask"] = raw(seq.Fields["obs"]), raw(seq.StepType), raw(seq.Mask)
	ns, err := b.SampleNStep(8, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.9})
	if err != nil {
		return nil, err
	}
	out["nstep/reward"], out["nstep/discount"], out["nstep/next_obs"] = raw(ns.Reward), raw(ns.Discount), raw(ns.NextObservation["obs"])
	return out, nil
}
