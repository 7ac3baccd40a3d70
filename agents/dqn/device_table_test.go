//go:build trajring_cuda

package dqn

import (
	"context"
	"math"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestDeviceLearnerTrainsOnTableTransitions runs the whole device loop
// once on CartPole steps in a gpu-backed prioritized table: transitions
// sampled into device memory, one TrainTransitions on them, and the new
// priorities set from the learner's device tensor with
// UpdatePrioritiesDevice. The TD errors match Agent's on the same
// transitions (copied to the host by FromTransitions) within 1e-5 of the
// largest, and the next device-selected sample draws each item with
// probability priority/total, the updated items' priorities being the
// learner's |TD|+eps.
func TestDeviceLearnerTrainsOnTableTransitions(t *testing.T) {
	ctx := context.Background()
	be, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	env, err := envs.NewCartPole(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	obsName, actName := env.ObservationSpec()[0].Name, env.ActionSpec()[0].Name
	fields := append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 400, Fields: fields, Seed: 3, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	table, err := buf.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Prioritized, MaxSize: 300, Seed: 3,
		DeviceSelection: true})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
		Tables: []observer.TableSequence{{Table: "replay", SequenceLength: 4}}, PadEndOfEpisodes: true, TileEndOfEpisodes: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), 5)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := driver.NewStepDriver(env, pol, 200, driver.WithObservers(obs))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := drv.Run(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}

	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions, cfg.BatchSize, cfg.Hidden, cfg.Seed = 4, 2, 32, []int{24, 24}, 11
	agent, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewDeviceLearner(cfg, be)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tr := new(tensorbuf.TableTransitions)
	defer tr.Release()
	if err := table.SampleTransitionsInto(ctx, tr, cfg.BatchSize, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.99}); err != nil {
		t.Fatal(err)
	}
	// Selected on the device: the host slices wait for HostMeta.
	if err := tr.HostMeta(); err != nil {
		t.Fatal(err)
	}
	if tr.Observation[obsName].IsNativelyAccessible() {
		t.Fatal("the transitions are not in device memory")
	}
	valid := make([]byte, cfg.BatchSize)
	for i, v := range tr.Valid {
		if v {
			valid[i] = 1
		}
	}
	w := deviceTensor(t, be, tensor.Float64, rawbytes.Of(tr.Weights), cfg.BatchSize)
	vt := deviceTensor(t, be, tensor.Uint8, valid, cfg.BatchSize)
	if err := l.TrainTransitions(&tr.Transitions, obsName, actName, w, vt); err != nil {
		t.Fatal(err)
	}
	keys := make([]float64, len(tr.Keys))
	for i, k := range tr.Keys {
		keys[i] = math.Float64frombits(k)
	}
	kt := deviceTensor(t, be, tensor.Uint64, rawbytes.Of(keys), cfg.BatchSize)
	if err := table.UpdatePrioritiesDevice(kt, l.Priorities()); err != nil {
		t.Fatal(err)
	}

	hb := agent.NewBatch()
	if err := agent.FromTransitions(hb, tr, obsName, actName); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Train(hb); err != nil {
		t.Fatal(err)
	}
	td := make([]float32, cfg.BatchSize)
	if err := l.download(td, l.TD()); err != nil {
		t.Fatal(err)
	}
	if d := maxRelDiff(td, hb.TD); d > 1e-5 {
		t.Errorf("TD errors differ from Agent's by %.3g of the largest", d)
	}
	prio := make([]float32, cfg.BatchSize)
	if err := l.download(prio, l.Priorities()); err != nil {
		t.Fatal(err)
	}

	// Every item's weight: 1 (a fresh table's default) unless updated.
	all, err := table.All()
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	weight := map[uint64]float64{}
	for _, k := range all.Keys {
		weight[k] = 1
	}
	for i, k := range tr.Keys { // a key given twice takes its last priority
		weight[k] = float64(prio[i])
	}
	var total float64
	for _, v := range weight {
		total += v
	}
	bt, err := table.Sample(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	if err := bt.HostMeta(); err != nil {
		t.Fatal(err)
	}
	for i, k := range bt.Keys {
		want := weight[k] / total
		if math.Abs(bt.Probabilities[i]-want) > 1e-9*want {
			t.Fatalf("item %d (key %d): drawn with probability %v, want %v", i, k, bt.Probabilities[i], want)
		}
	}
}
