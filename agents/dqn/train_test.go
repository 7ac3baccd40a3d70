//go:build !cuda

package dqn

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestRunCartPoleLearns trains a small network for a few thousand env
// steps with a fixed seed and checks that the greedy policy's mean
// return is far above a random policy's (about 22 on CartPole-v1).
// Every random choice is seeded, so the run is deterministic.
func TestRunCartPoleLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("a training run of a few seconds; skipped in -short mode")
	}
	if raceEnabled && os.Getenv("TRAJRING_TRAIN_RACE") == "" {
		t.Skip("about 36 s under the race detector; run without -race, or set TRAJRING_TRAIN_RACE=1")
	}
	var rounds int
	res, err := RunCartPole(context.Background(), TrainConfig{
		Agent: Config{Hidden: []int{64, 64}, DoubleDQN: true}, Steps: 8_000, LearningStarts: 500,
		TrainFreq: 64, GradientSteps: 32, ExplorationFraction: 0.2, Prioritized: true,
		EvalEpisodes: 20, Seed: 1, Progress: func(Progress) { rounds++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("greedy mean return %.1f after %d env steps, %d gradient steps, %.1fs", res.EvalReturn, res.Last.EnvSteps,
		res.Last.GradientSteps, res.Last.Elapsed)
	if res.EvalReturn < 100 {
		t.Fatalf("greedy mean return %.1f, want >= 100 (random: about 22)", res.EvalReturn)
	}
	if res.Last.EnvSteps != 8_000 || rounds != 8_000/64 || res.Last.ValidFraction != 1 {
		t.Fatalf("env steps %d, rounds %d, valid fraction %v", res.Last.EnvSteps, rounds, res.Last.ValidFraction)
	}
}

func TestRunCartPoleRejectsBadConfig(t *testing.T) {
	for _, c := range []TrainConfig{{Steps: -1}, {Gamma: 2}, {NStep: -1}, {Alpha: -1}, {Agent: Config{Hidden: []int{0}}}} {
		if _, err := RunCartPole(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}
