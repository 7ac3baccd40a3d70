// Command godriver is the Go half of python/tests/test_env.py: it collects
// 200 batched steps of CartPole-v1 (8 rows, seed 3) with the Go step driver
// and a fixed policy (row r's action at iteration i is 1 when (7i+3r) mod 5
// < 2), through an AddTrajectory observer into a buffer, and prints the
// exported transitions' bytes as JSON, so that the test can check that a
// Python-driven collection stores exactly the same.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

const rows, iterations = 8, 200

func main() {
	out, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "godriver:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

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

func run() (map[string]any, error) {
	env, err := envs.NewCartPole(rows, 3)
	if err != nil {
		return nil, err
	}
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: 256, Fields: append(env.ObservationSpec(), env.ActionSpec()...)})
	if err != nil {
		return nil, err
	}
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "replay"})
	if err != nil {
		return nil, err
	}
	obs, err := observer.NewAddTrajectory(b, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "replay", SequenceLength: 2}}})
	if err != nil {
		return nil, err
	}
	it := 0
	act := make([]int64, rows)
	policy := driver.PolicyFunc(func(ts *driver.TimeStep, _ any) (*driver.PolicyStep, error) {
		for r := range act {
			act[r] = 0
			if (7*it+3*r)%5 < 2 {
				act[r] = 1
			}
		}
		it++
		return &driver.PolicyStep{Action: map[string]*tensor.Dense{envs.CartPoleActionName: tensor.New(tensor.WithShape(rows), tensor.WithBacking(act))}}, nil
	})
	d, err := driver.NewStepDriver(env, policy, 1<<30, driver.WithObservers(obs), driver.WithMaxIterations(iterations))
	if err != nil {
		return nil, err
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		return nil, err
	}
	if err := obs.Flush(); err != nil {
		return nil, err
	}
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		return nil, err
	}
	e := exp[0]
	name := envs.CartPoleObservationName
	return map[string]any{
		"observation": raw(e.Observation[name]), "next_observation": raw(e.NextObservation[name]),
		"action": raw(e.Action[envs.CartPoleActionName]), "reward": raw(e.Reward), "discount": raw(e.Discount),
		"is_done": raw(e.IsDone), "row": raw(e.Rows), "step": raw(e.Steps), "table_size": tb.Size(), "steps": b.Stats().Steps,
	}, nil
}
