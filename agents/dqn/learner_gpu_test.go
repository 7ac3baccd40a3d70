//go:build trajring_cuda

package dqn

import (
	"context"
	"math"
	"testing"
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
// round's gradient steps: none with uniform replay, and the priorities
// (4 bytes a transition) with prioritized replay, whose table selects on
// the host.
func TestRunCartPoleGPULearns(t *testing.T) {
	if testing.Short() {
		t.Skip("two training runs of about 10 s each on the stand-in (under -race too); skipped in -short mode")
	}
	for _, tc := range []struct {
		name        string
		prioritized bool
		d2h         float64
		minReturn   float64
	}{
		{"uniform", false, 0, 100},
		{"prioritized", true, 4 * 64, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gpuLearnsRun(tc.prioritized)
			var trained int
			cfg.Progress = func(p Progress) {
				if p.GradientSteps == 0 {
					return
				}
				trained++
				if p.D2HPerGradStep != tc.d2h || !(p.GradStepsPerSec > 0) || math.IsNaN(p.Loss) {
					t.Errorf("round at %d env steps: %v device-to-host bytes per gradient step (want %v), %v gradient steps/s, loss %v",
						p.EnvSteps, p.D2HPerGradStep, tc.d2h, p.GradStepsPerSec, p.Loss)
				}
			}
			res, err := RunCartPole(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("greedy mean return %.1f after %d env steps, %d gradient steps, %.1fs (%.0f gradient steps/s)", res.EvalReturn,
				res.Last.EnvSteps, res.Last.GradientSteps, res.Last.Elapsed, res.Last.GradStepsPerSec)
			if want := (4_000 - 500) / 64 * 32; trained == 0 || res.Last.GradientSteps < int64(want) || res.Agent != nil || res.Network == nil {
				t.Fatalf("%d rounds trained, %d gradient steps (want %d), agent %v, network %v", trained, res.Last.GradientSteps, want, res.Agent, res.Network)
			}
			if res.EvalReturn < tc.minReturn {
				t.Fatalf("greedy mean return %.1f, want >= %v (random: about 22)", res.EvalReturn, tc.minReturn)
			}
		})
	}
}
