//go:build trajring_cuda

package dqn

import (
	"bytes"
	"context"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/internal/rawbytes"
)

// gpuLearnsRun is learnsRun (TestRunCartPoleLearns's seeded run) on the
// gpu backend, shortened to 4,000 env steps.
func gpuLearnsRun(prioritized bool) TrainConfig {
	c := learnsRun()
	c.Backend, c.Steps, c.Prioritized = BackendGPU, 4_000, prioritized
	return c
}

// TestRunCartPoleGPULearns trains DeviceLearner through RunCartPole
// (Backend gpu, the buffer on the gpu backend) for a few thousand seeded
// env steps and checks learning progress (a greedy mean return far above
// a random policy's, about 22) and the device-to-host bytes of every
// round's gradient steps: none with uniform replay; none with
// prioritized replay either (the table selects, and takes the new
// priorities, on the device) but in the few rounds whose sampling grew
// the table's device mirror (a doubling from 64 slots, when the host
// learns the device's priorities: at most 12 bytes a slot).
func TestRunCartPoleGPULearns(t *testing.T) {
	if testing.Short() {
		t.Skip("two training runs of about 10 s each on the stand-in (under -race too); skipped in -short mode")
	}
	for _, tc := range []struct {
		name        string
		prioritized bool
		growths     int // rounds that may copy: mirror doublings from 64 slots to 4,096
		minReturn   float64
	}{
		{"uniform", false, 0, 100},
		{"prioritized", true, 7, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gpuLearnsRun(tc.prioritized)
			var trained, copied int
			cfg.Progress = func(p Progress) {
				if p.GradientSteps == 0 {
					return
				}
				trained++
				if !(p.GradStepsPerSec > 0) || math.IsNaN(p.Loss) {
					t.Errorf("round at %d env steps: %v gradient steps/s, loss %v", p.EnvSteps, p.GradStepsPerSec, p.Loss)
				}
				if p.D2HPerGradStep == 0 {
					return
				}
				copied++
				if bound := 12 * 2 * float64(p.EnvSteps) / float64(cfg.GradientSteps); copied > tc.growths || p.D2HPerGradStep > bound {
					t.Errorf("round at %d env steps: %v device-to-host bytes per gradient step, the %d-th round that copies (want at most %d, each at most %v)",
						p.EnvSteps, p.D2HPerGradStep, copied, tc.growths, bound)
				}
			}
			res, err := RunCartPole(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("greedy mean return %.1f after %d env steps, %d gradient steps, %.1fs (%.0f gradient steps/s); %d of %d rounds copied to the host",
				res.EvalReturn, res.Last.EnvSteps, res.Last.GradientSteps, res.Last.Elapsed, res.Last.GradStepsPerSec, copied, trained)
			if want := (4_000 - 500) / 64 * 32; trained == 0 || res.Last.GradientSteps < int64(want) || res.Agent != nil || res.Network == nil {
				t.Fatalf("%d rounds trained, %d gradient steps (want %d), agent %v, network %v", trained, res.Last.GradientSteps, want, res.Agent, res.Network)
			}
			if res.EvalReturn < tc.minReturn {
				t.Fatalf("greedy mean return %.1f, want >= %v (random: about 22)", res.EvalReturn, tc.minReturn)
			}
		})
	}
}

// TestRunCartPoleGPUGraphIsDirect: a seeded training run on the gpu
// backend ends with the same network, bit for bit, and the same losses
// round by round whether its gradient steps are replayed from a CUDA
// graph (the default) or launched kernel by kernel (TRAJRING_DQN_GRAPH=0),
// with uniform and prioritized replay; the graph run captures its step
// once (the sample's tensors are reused), launches one graph a gradient
// step and waits for the device once a round as before.
func TestRunCartPoleGPUGraphIsDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("four training runs of about 3 s each on the stand-in; skipped in -short mode")
	}
	for _, prioritized := range []bool{false, true} {
		t.Run(map[bool]string{false: "uniform", true: "prioritized"}[prioritized], func(t *testing.T) {
			type run struct {
				net           []byte
				losses        []float64
				syncs         []int64
				launches      []float64
				graphs        []int64
				captures, gls int64
			}
			do := func(graph bool) run {
				old := deviceTrainGraph
				deviceTrainGraph = graph
				defer func() { deviceTrainGraph, onDeviceTrainClose = old, nil }()
				var r run
				onDeviceTrainClose = func(d *deviceTrainLearner) { r.captures, r.gls = d.GraphCaptures(), d.GraphLaunches() }
				cfg := gpuLearnsRun(prioritized)
				cfg.Steps, cfg.EvalEvery = 1_200, 0
				cfg.Progress = func(p Progress) {
					if p.GradientSteps > 0 {
						r.losses = append(r.losses, p.Loss)
						r.syncs = append(r.syncs, p.SyncsPerRound)
						r.launches = append(r.launches, p.LaunchesPerGradStep)
						r.graphs = append(r.graphs, p.GraphLaunchesPerRound)
					}
				}
				res, err := RunCartPole(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				for i := range res.Network.m.w {
					r.net = append(append(r.net, rawbytes.Of(res.Network.m.w[i])...), rawbytes.Of(res.Network.m.b[i])...)
				}
				return r
			}
			g, d := do(true), do(false)
			if !bytes.Equal(g.net, d.net) || !slices.Equal(g.losses, d.losses) || len(g.losses) == 0 {
				t.Fatalf("graph and direct runs differ: networks equal %v, losses %v and %v", bytes.Equal(g.net, d.net), g.losses, d.losses)
			}
			if !slices.Equal(g.syncs, d.syncs) {
				t.Errorf("syncs per round: graph %v, direct %v", g.syncs, d.syncs)
			}
			for i := range g.graphs {
				if want := int64(gpuLearnsRun(prioritized).GradientSteps); g.graphs[i] != want || d.graphs[i] != 0 {
					t.Fatalf("round %d: graph launches %d (graph run, want %d, one a gradient step) and %d (direct run, want 0)", i, g.graphs[i], want, d.graphs[i])
				}
			}
			if g.captures != 1 || g.gls == 0 || d.gls != 0 {
				t.Errorf("graph run: %d captures, %d graph launches; direct run: %d graph launches", g.captures, g.gls, d.gls)
			}
			t.Logf("launches per gradient step (last round): graph %v, direct %v; syncs per round %v; %d graph launches",
				g.launches[len(g.launches)-1], d.launches[len(d.launches)-1], g.syncs[len(g.syncs)-1], g.gls)
		})
	}
}
