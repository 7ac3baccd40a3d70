//go:build trajring_cuda

package dqn

import (
	"bytes"
	"context"
	"errors"
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
// and syncs round by round whether each round is replayed from one CUDA
// graph (the default: RecordRound), its gradient steps each from a graph
// of their own (TRAJRING_DQN_ROUND=0) or everything launched kernel by
// kernel (TRAJRING_DQN_GRAPH=0), with uniform and prioritized replay. The
// step-graph run captures its step once and launches one graph a
// gradient step; the round-graph run makes its first learning round
// directly, with step graphs, records the next (and again each round
// whose table outgrew its device mirror) and launches one graph a round,
// for a handful of launches a round in all.
func TestRunCartPoleGPUGraphIsDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("six training runs of about 2 s each on the stand-in; skipped in -short mode")
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
				rounds        int64
				records       int64
			}
			do := func(graph, round bool) run {
				oldG, oldR := deviceTrainGraph, deviceTrainRound
				deviceTrainGraph, deviceTrainRound = graph, round
				defer func() { deviceTrainGraph, deviceTrainRound, onDeviceTrainClose = oldG, oldR, nil }()
				var r run
				onDeviceTrainClose = func(d *deviceTrainLearner) {
					r.captures, r.gls, r.rounds, r.records = d.GraphCaptures(), d.GraphLaunches(), d.RoundLaunches(), d.RoundRecords()
				}
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
			rg, g, d := do(true, true), do(true, false), do(false, false)
			for _, o := range []struct {
				name string
				r    run
			}{{"round graph", rg}, {"step graph", g}} {
				if !bytes.Equal(o.r.net, d.net) || !slices.Equal(o.r.losses, d.losses) || len(o.r.losses) == 0 {
					t.Fatalf("%s and direct runs differ: networks equal %v, losses %v and %v", o.name, bytes.Equal(o.r.net, d.net), o.r.losses, d.losses)
				}
				if !slices.Equal(o.r.syncs, d.syncs) {
					t.Errorf("syncs per round: %s %v, direct %v", o.name, o.r.syncs, d.syncs)
				}
			}
			steps := int64(gpuLearnsRun(prioritized).GradientSteps)
			direct := 0
			for i := range g.graphs {
				if g.graphs[i] != steps || d.graphs[i] != 0 {
					t.Fatalf("round %d: graph launches %d (step-graph run, want %d, one a gradient step) and %d (direct run, want 0)", i, g.graphs[i], steps, d.graphs[i])
				}
				switch rg.graphs[i] {
				case 1: // the round's graph
					// The graph, and the mirrors' upkeep before it: a patch, a
					// metadata scatter, a whole repair of a new tree layout
					// (a launch a level).
					if rg.launches[i]*float64(steps) > 8 {
						t.Errorf("round %d: %v launches a gradient step, %v a round, want at most 8 a round", i, rg.launches[i], rg.launches[i]*float64(steps))
					}
				case steps: // made directly, its steps replayed from their graph
					direct++
				default:
					t.Fatalf("round %d: %d graph launches in the round-graph run, want 1 or %d", i, rg.graphs[i], steps)
				}
			}
			if rg.graphs[0] != steps || direct != 1 {
				t.Errorf("round-graph run: graph launches a round %v, want %d (made directly), then 1", rg.graphs, steps)
			}
			// The table outgrows its device mirror during the run: the
			// round found stale is recorded again.
			if rg.records < 2 {
				t.Errorf("round-graph run: %d rounds recorded, want 2 or more (the first, and again after the mirror moved)", rg.records)
			}
			if g.captures != 1 || g.gls == 0 || d.gls != 0 || rg.rounds != int64(len(rg.graphs)-direct) {
				t.Errorf("step-graph run: %d captures, %d graph launches; direct run: %d graph launches; round-graph run: %d rounds replayed of %d (%d direct)",
					g.captures, g.gls, d.gls, rg.rounds, len(rg.graphs), direct)
			}
			t.Logf("launches per gradient step (last round): round graph %v, step graph %v, direct %v; syncs per round %v; graph launches %d, %d; rounds made directly %d of %d",
				rg.launches[len(rg.launches)-1], g.launches[len(g.launches)-1], d.launches[len(d.launches)-1], g.syncs[len(g.syncs)-1], rg.gls, g.gls, direct, len(rg.graphs))
		})
	}
}

// TestRoundGraphClosedWithLearner: a DeviceLearner's Close closes the
// round graphs it recorded (their graphs replay its memory), so a
// RoundGraph kept past it cannot be replayed: ReplayRound fails with
// ErrConfig instead of launching onto freed memory.
func TestRoundGraphClosedWithLearner(t *testing.T) {
	var kept *RoundGraph
	var learner *DeviceLearner
	onDeviceTrainClose = func(d *deviceTrainLearner) {
		// Keep the round from the trainer's own close: the learner's
		// Close must close it.
		kept, learner, d.round = d.round, d.DeviceLearner, nil
	}
	defer func() { onDeviceTrainClose = nil }()
	cfg := gpuLearnsRun(false)
	cfg.Steps, cfg.EvalEvery = 800, 0
	if _, err := RunCartPole(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if kept == nil || learner == nil {
		t.Fatal("the run recorded no round")
	}
	if kept.g != nil {
		t.Error("the learner's Close left its round's graph alive")
	}
	if ok, err := learner.ReplayRound(kept); ok || !errors.Is(err, ErrConfig) {
		t.Errorf("ReplayRound after the learner's Close: %v, %v; want false, ErrConfig", ok, err)
	}
}
