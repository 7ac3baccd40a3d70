//go:build trajring_cuda

package dqn

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// slotBatch is a DeviceBatch on tensors of its own, refilled with fresh
// transitions before every step (as a trainer's reused sample is).
type slotBatch struct {
	db     DeviceBatch
	arenas []kernels.Arena // obs, next obs, actions, reward, discount, weights, valid
}

func newSlotBatch(t *testing.T, be *gpu.Backend, cfg Config) *slotBatch {
	t.Helper()
	B, d := cfg.BatchSize, cfg.ObsDim
	s := &slotBatch{}
	mk := func(dt tensor.Dtype, shape ...int) *tensor.Dense {
		n := 1
		for _, x := range shape {
			n *= x
		}
		a, err := be.Alloc(int64(n) * int64(dt.Size()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Free(a) })
		s.arenas = append(s.arenas, a)
		x, err := be.Tensor(a, 0, dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	s.db = DeviceBatch{Obs: mk(tensor.Float32, B, d), NextObs: mk(tensor.Float32, B, d), Actions: mk(tensor.Int64, B),
		Reward: mk(tensor.Float32, B), Discount: mk(tensor.Float32, B), Weights: mk(tensor.Float64, B), Valid: mk(tensor.Uint8, B)}
	return s
}

// fill queues uploads of random transitions into the batch's tensors.
func (s *slotBatch) fill(t *testing.T, be *gpu.Backend, cfg Config, rng *rand.Rand) {
	t.Helper()
	B, d := cfg.BatchSize, cfg.ObsDim
	obs, next := make([]float32, B*d), make([]float32, B*d)
	for i := range obs {
		obs[i], next[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	act, rew, disc, w, valid := make([]int64, B), make([]float32, B), make([]float32, B), make([]float64, B), make([]byte, B)
	for i := range B {
		act[i] = rng.Int64N(int64(cfg.NumActions))
		rew[i] = float32(rng.NormFloat64() * 2)
		disc[i] = []float32{0, 0.99, 0.970299}[rng.IntN(3)]
		w[i] = 0.25 + rng.Float64()
		if rng.IntN(8) != 0 {
			valid[i] = 1
		}
	}
	for i, raw := range [][]byte{rawbytes.Of(obs), rawbytes.Of(next), rawbytes.Of(act), rawbytes.Of(rew), rawbytes.Of(disc),
		rawbytes.Of(w), valid} {
		if err := be.Upload(s.arenas[i], 0, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeviceLearnerGraphIsDirect: TrainStep replayed from a CUDA graph
// (UseGraph) writes the same bytes into every tensor a step writes as
// the step launched kernel by kernel, step after step, on a batch whose
// tensors are refilled before each step (one capture, then one graph
// launch a step and no kernel launch), across a new learning rate every
// few steps, target updates, steps taken off the graph in between (the
// device's step count then catches up) and a batch on other tensors (a
// second capture); with and without double DQN, clipping and hidden
// layers, fused and separate.
func TestDeviceLearnerGraphIsDirect(t *testing.T) {
	tests := []struct {
		double   bool
		maxNorm  float64
		hidden   []int
		separate bool
	}{
		{true, 10, []int{40, 24}, false},
		{true, 0.05, []int{40, 24}, false},
		{false, -1, []int{17}, false},
		{true, 0.5, nil, false},
		{true, 1, []int{24}, true},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("double=%v,clip=%v,hidden=%v,separate=%v", tc.double, tc.maxNorm, tc.hidden, tc.separate), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ObsDim, cfg.NumActions, cfg.BatchSize = 5, 3, 37
			cfg.Hidden, cfg.DoubleDQN, cfg.MaxGradNorm, cfg.Seed = tc.hidden, tc.double, tc.maxNorm, uint64(11+i)
			be, ls := newDevicePair(t, cfg)
			for _, l := range ls {
				l.separate = tc.separate
			}
			graph, direct := ls[0], ls[1]
			graph.UseGraph(true)
			slot, other := newSlotBatch(t, be, cfg), newSlotBatch(t, be, cfg)
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			const steps = 12
			for step := range steps {
				b := slot
				if step >= 9 {
					b = other // new tensors: a second capture
				}
				b.fill(t, be, cfg, rng)
				if step%4 == 3 {
					lr := 1e-3 * float64(step+1)
					for _, l := range ls {
						if err := l.SetLearningRate(lr); err != nil {
							t.Fatal(err)
						}
					}
				}
				if step == 5 {
					for _, l := range ls {
						if err := l.UpdateTarget(); err != nil {
							t.Fatal(err)
						}
					}
				}
				graph.UseGraph(step != 6 && step != 7) // two steps off the graph
				l0, g0 := be.Launches(), graph.GraphLaunches()
				if err := graph.TrainStep(b.db); err != nil {
					t.Fatal(err)
				}
				l1 := be.Launches()
				if err := direct.TrainStep(b.db); err != nil {
					t.Fatal(err)
				}
				if step != 0 && step != 6 && step != 7 && step != 8 && step != 9 {
					// replayed: one graph launch, no kernel launch
					if l1-l0 != 1 || graph.GraphLaunches()-g0 != 1 {
						t.Errorf("step %d: %d launches and %d graph launches, want 1 graph launch", step, l1-l0, graph.GraphLaunches()-g0)
					}
				}
				gt, dt := graph.stepTensors(), direct.stepTensors()
				for name, d := range gt {
					if !bytes.Equal(rawOf(t, graph, d), rawOf(t, direct, dt[name])) {
						t.Fatalf("step %d: %s differs between the graph and the direct launches", step, name)
					}
				}
			}
			if graph.GraphCaptures() != 2 || graph.Steps() != steps || graph.adamT != direct.adamT {
				t.Errorf("%d captures, %d steps, Adam step %d (direct %d); want 2, %d and equal", graph.GraphCaptures(), graph.Steps(),
					graph.adamT, direct.adamT, steps)
			}
		})
	}
}

// newDevicePair returns a backend and two device learners of cfg on it,
// closed when the test ends.
func newDevicePair(t *testing.T, cfg Config) (*gpu.Backend, [2]*DeviceLearner) {
	t.Helper()
	be, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	var ls [2]*DeviceLearner
	for j := range ls {
		if ls[j], err = NewDeviceLearner(cfg, be); err != nil {
			t.Fatal(err)
		}
		l := ls[j]
		t.Cleanup(func() { _ = l.Close() })
	}
	return be, ls
}

// TestDeviceLearnerGraphCaptureRetries: a refused capture launches the
// step directly (the same bytes as a learner that never uses a graph) and
// the next step captures again; refusals in a row turn the graph off.
func TestDeviceLearnerGraphCaptureRetries(t *testing.T) {
	for _, refuse := range []int{2, 100} {
		t.Run(fmt.Sprintf("refuse=%d", refuse), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ObsDim, cfg.NumActions, cfg.BatchSize, cfg.Hidden, cfg.Seed = 5, 3, 16, []int{12}, 5
			be, ls := newDevicePair(t, cfg)
			graph, direct := ls[0], ls[1]
			graph.UseGraph(true)
			calls := 0
			old := captureStep
			captureStep = func(b *gpu.Backend, record func() error) (*gpu.Graph, error) {
				if calls++; calls <= refuse {
					return nil, fmt.Errorf("capture %d refused by the test", calls)
				}
				return old(b, record)
			}
			t.Cleanup(func() { captureStep = old })
			slot := newSlotBatch(t, be, cfg)
			rng := rand.New(rand.NewPCG(7, 8))
			const steps = 6
			for step := range steps {
				slot.fill(t, be, cfg, rng)
				for _, l := range ls {
					if err := l.TrainStep(slot.db); err != nil {
						t.Fatal(err)
					}
				}
				gt, dt := graph.stepTensors(), direct.stepTensors()
				for name, d := range gt {
					if !bytes.Equal(rawOf(t, graph, d), rawOf(t, direct, dt[name])) {
						t.Fatalf("step %d: %s differs between the learner whose captures were refused and the direct one", step, name)
					}
				}
			}
			wantCalls, wantGraphs, wantOn := 3, int64(0), false
			if refuse < maxCaptureFails {
				wantCalls, wantGraphs, wantOn = refuse+1, int64(steps-refuse), true
			}
			if calls != wantCalls || graph.GraphLaunches() != wantGraphs || graph.useGraph != wantOn || graph.GraphError() == nil {
				t.Errorf("%d captures tried, %d graph launches, graph on %v, error %v; want %d, %d, %v and the last refusal",
					calls, graph.GraphLaunches(), graph.useGraph, graph.GraphError(), wantCalls, wantGraphs, wantOn)
			}
		})
	}
}
