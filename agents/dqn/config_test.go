package dqn

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestValidateFields: every field out of its range, zeros that make no
// sense included, is refused with a *FieldError naming it (ErrConfig),
// by Validate and by RunCartPole before anything is written; zeros that
// make sense are accepted as given.
func TestValidateFields(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		field string
		set   func(*TrainConfig)
	}{
		{"Steps", func(c *TrainConfig) { c.Steps = 0 }},
		{"BufferSize", func(c *TrainConfig) { c.BufferSize = 1 }},
		{"LearningStarts", func(c *TrainConfig) { c.LearningStarts = -1 }},
		{"Gamma", func(c *TrainConfig) { c.Gamma = 2 }},
		{"Gamma", func(c *TrainConfig) { c.Gamma = nan }},
		{"NStep", func(c *TrainConfig) { c.NStep = 0 }},
		{"NStep", func(c *TrainConfig) { c.NStep = c.BufferSize }},
		{"TargetUpdateInterval", func(c *TrainConfig) { c.TargetUpdateInterval = 0 }},
		{"TrainFreq", func(c *TrainConfig) { c.TrainFreq = 0 }},
		{"GradientSteps", func(c *TrainConfig) { c.GradientSteps = -1 }},
		{"ExplorationFraction", func(c *TrainConfig) { c.ExplorationFraction = 1.01 }},
		{"ExplorationFinalEps", func(c *TrainConfig) { c.ExplorationFinalEps = -0.01 }},
		{"LearningRateEnd", func(c *TrainConfig) { c.LearningRateEnd = -1e-9 }},
		{"LearningRateEnd", func(c *TrainConfig) { c.LearningRateEnd = math.Inf(1) }},
		// The rate falls: an end above the start is refused (issue 39).
		{"LearningRateEnd", func(c *TrainConfig) { c.LearningRateEnd = c.Agent.LearningRate * 1.5 }},
		{"Alpha", func(c *TrainConfig) { c.Alpha = 0 }},
		{"Beta", func(c *TrainConfig) { c.Beta = nan }},
		{"EvalEpisodes", func(c *TrainConfig) { c.EvalEpisodes = 0 }},
		{"EvalEvery", func(c *TrainConfig) { c.EvalEvery = -1 }},
		{"StopOnReturn", func(c *TrainConfig) { c.StopOnReturn = nan }},
		{"CheckpointEvery", func(c *TrainConfig) { c.CheckpointEvery = -1 }},
		{"Agent.BatchSize", func(c *TrainConfig) { c.Agent.BatchSize = 0 }},
		{"Agent.BatchSize", func(c *TrainConfig) { c.Agent.BatchSize = c.BufferSize + 1 }},
		{"Agent.LearningRate", func(c *TrainConfig) { c.Agent.LearningRate = 0 }},
		{"Agent.LearningRate", func(c *TrainConfig) { c.Agent.LearningRate = nan }},
		{"Agent.MaxGradNorm", func(c *TrainConfig) { c.Agent.MaxGradNorm = 0 }},
		{"Agent.PriorityEpsilon", func(c *TrainConfig) { c.Agent.PriorityEpsilon = -1 }},
		{"Agent.Hidden", func(c *TrainConfig) { c.Agent.Hidden = []int{64, 0} }},
		{"Agent.Hidden", func(c *TrainConfig) { c.Agent.Hidden = []int{maxLayer + 1} }},
	} {
		c := DefaultTrainConfig()
		tc.set(&c)
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || !errors.Is(err, ErrConfig) || fe.Field != tc.field {
			t.Errorf("%s: Validate: %v, want a FieldError of %s", tc.field, err, tc.field)
		}
		dir := filepath.Join(t.TempDir(), "ck")
		c.CheckpointDir = dir
		if tc.field != "CheckpointEvery" {
			c.CheckpointEvery = 1
		}
		if _, err := RunCartPole(context.Background(), c); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: RunCartPole: %v, want a FieldError of %s", tc.field, err, tc.field)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused run created %s", tc.field, dir)
		}
	}
	ok := DefaultTrainConfig()
	ok.Gamma, ok.LearningStarts, ok.GradientSteps, ok.ExplorationFraction, ok.ExplorationFinalEps = 0, 0, 0, 0, 0
	ok.Beta, ok.LearningRateEnd, ok.EvalEvery, ok.Agent.PriorityEpsilon, ok.Agent.Hidden = 0, 0, 0, 0, nil
	ok.StopOnReturn = 0
	if err := ok.Validate(); err != nil {
		t.Errorf("valid zeros: %v", err)
	}
	uniform := DefaultTrainConfig()
	uniform.Prioritized, uniform.Alpha, uniform.Beta = false, 0, 7 // not used without prioritized replay
	if err := uniform.Validate(); err != nil {
		t.Errorf("uniform replay with unused alpha and beta: %v", err)
	}
	if err := (TrainConfig{}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("the zero TrainConfig: %v, want ErrConfig (zero steps)", err)
	}
	for _, c := range []TrainConfig{{Steps: 1, BufferSize: 2, NStep: 1, TargetUpdateInterval: 1, TrainFreq: 1, EvalEpisodes: 1, CheckpointEvery: 10},
		{Steps: 1, BufferSize: 2, NStep: 1, TargetUpdateInterval: 1, TrainFreq: 1, EvalEpisodes: 1, Resume: true}} {
		c.Agent = DefaultConfig()
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("checkpoints without a directory: %v, want ErrConfig", err)
		}
	}
}

// TestValidateMemory: sizes whose learner or evaluation memory exceeds
// the available memory are refused before anything is allocated, naming
// the field that takes the most; the estimate is computed without
// overflow for any sizes.
func TestValidateMemory(t *testing.T) {
	old := memAvailable
	defer func() { memAvailable = old }()
	memAvailable = func() (int64, error) { return 1 << 30, nil } // 1 GiB
	for _, tc := range []struct {
		field string
		set   func(*TrainConfig)
	}{
		{"", func(*TrainConfig) {}}, // the defaults take a few MB
		{"", func(c *TrainConfig) { c.EvalEpisodes = 100_000 }},
		{"EvalEpisodes", func(c *TrainConfig) { c.EvalEpisodes = 100_000_000 }},
		{"EvalEpisodes", func(c *TrainConfig) { c.EvalEpisodes = math.MaxInt }},
		{"", func(c *TrainConfig) { c.Agent.BatchSize = 10_000 }},
		{"Agent.BatchSize", func(c *TrainConfig) { c.BufferSize, c.Agent.BatchSize = 100_000_000, 100_000_000 }},
		{"Agent.BatchSize", func(c *TrainConfig) { c.BufferSize, c.Agent.BatchSize = math.MaxInt, math.MaxInt }},
		{"Agent.Hidden", func(c *TrainConfig) { c.Agent.Hidden = []int{maxLayer, maxLayer, maxLayer} }},
	} {
		c := DefaultTrainConfig()
		tc.set(&c)
		err := c.Validate()
		var fe *FieldError
		if tc.field == "" && err != nil || tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("want field %q refused: %v", tc.field, err)
		}
	}
	memAvailable = func() (int64, error) { return 0, errors.New("no report") }
	c := DefaultTrainConfig()
	c.EvalEpisodes = 100_000_000
	if err := c.Validate(); err != nil {
		t.Errorf("without a memory report only the ranges apply: %v", err)
	}
}

// TestDefaultTrainConfig pins the defaults to RL Zoo's CartPole-v1 DQN
// settings plus this package's additions.
func TestDefaultTrainConfig(t *testing.T) {
	want := TrainConfig{
		Agent: Config{Hidden: []int{256, 256}, BatchSize: 64, LearningRate: 2.3e-3, MaxGradNorm: 10, DoubleDQN: true,
			PriorityEpsilon: 1e-6},
		Steps: 50_000, BufferSize: 100_000, LearningStarts: 1_000, Gamma: 0.99, NStep: 1, TargetUpdateInterval: 10,
		TrainFreq: 256, GradientSteps: 128, ExplorationFraction: 0.16, ExplorationFinalEps: 0.04, LearningRateEnd: 0,
		Prioritized: true, Alpha: 0.6, Beta: 0.4, EvalEpisodes: 100, EvalEvery: 2_500, StopOnReturn: 500, Seed: 1, CheckpointCompress: true,
	}
	if got := DefaultTrainConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultTrainConfig() = %+v\nwant %+v", got, want)
	}
}
