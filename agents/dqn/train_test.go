package dqn

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"
)

// learnsRun is the seeded run of TestRunCartPoleLearns: 8,000 env steps,
// a 64x64 network, rounds of 64 env steps and 32 gradient steps, a
// constant learning rate, no evaluations during training.
func learnsRun() TrainConfig {
	c := DefaultTrainConfig()
	c.Agent.Hidden = []int{64, 64}
	c.Steps, c.LearningStarts, c.TrainFreq, c.GradientSteps, c.ExplorationFraction = 8_000, 500, 64, 32, 0.2
	c.LearningRateEnd, c.EvalEpisodes, c.EvalEvery, c.Seed = c.Agent.LearningRate, 20, 0, 1
	return c
}

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
	cfg := learnsRun()
	cfg.Progress = func(Progress) { rounds++ }
	res, err := RunCartPole(context.Background(), cfg)
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

// TestNewRejectsBadConfig: New refuses every field out of its range with
// a *FieldError naming it, and takes zeros that make sense.
func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"ObsDim", func(c *Config) { c.ObsDim = 0 }},
		{"NumActions", func(c *Config) { c.NumActions = 0 }},
		{"BatchSize", func(c *Config) { c.BatchSize = 0 }},
		{"LearningRate", func(c *Config) { c.LearningRate = -1 }},
		{"MaxGradNorm", func(c *Config) { c.MaxGradNorm = 0 }},
		{"PriorityEpsilon", func(c *Config) { c.PriorityEpsilon = math.Inf(1) }},
		{"Hidden", func(c *Config) { c.Hidden = []int{-3} }},
	} {
		c := testConfig(4, 2, 8, 16)
		tc.set(&c)
		var fe *FieldError
		if _, err := New(c); !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a FieldError of %s", tc.field, err, tc.field)
		}
	}
	c := testConfig(4, 2, 8) // no hidden layers: a linear Q-function
	c.MaxGradNorm, c.PriorityEpsilon = -1, 0
	if a, err := New(c); err != nil || len(a.dims) != 2 {
		t.Errorf("a linear network without clipping: %v", err)
	}
}
