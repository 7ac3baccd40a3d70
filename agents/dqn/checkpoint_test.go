package dqn

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// smallRun is a short seeded run: rounds of 100 env steps, training from
// 200, a tiny network, the default learning-rate schedule.
func smallRun(dir string, steps, every int) TrainConfig {
	c := DefaultTrainConfig()
	c.Agent.Hidden, c.Agent.BatchSize = []int{16}, 16
	c.Steps, c.BufferSize, c.LearningStarts, c.TrainFreq, c.GradientSteps = steps, 2000, 200, 100, 4
	c.ExplorationFraction, c.EvalEpisodes, c.EvalEvery, c.Seed = 0.5, 2, 400, 7
	c.CheckpointDir, c.CheckpointEvery = dir, every
	return c
}

// snapshot is what a test compares of a learner at a checkpoint.
type snapshot struct {
	agent         []byte // SaveState
	stats         tensorbuf.Stats
	cursor        int64
	items         int
	lastNext      tensorbuf.StepType // next step type of the newest step
	lastNextKnown bool
}

func snap(t *testing.T, a *Agent, buf *tensorbuf.Buffer) snapshot {
	var sb bytes.Buffer
	if err := a.SaveState(&sb); err != nil {
		t.Error(err)
	}
	tb, err := buf.Table("replay")
	if err != nil {
		t.Error(err)
	}
	s := snapshot{agent: sb.Bytes(), stats: buf.Stats(), cursor: buf.Cursor(0), items: tb.Size()}
	_, s.lastNext, s.lastNextKnown = buf.StepTypeAt(0, s.cursor-1)
	return s
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeContinuesRun checkpoints a run at 500 env steps (the end of
// the round reaching it), then resumes copies of that checkpoint in fresh
// RunCartPole calls: the resumed learner starts with exactly the saved
// agent (weights, target, Adam, counters), buffer (steps, cursor, cuts)
// and table, the Progress history of the uninterrupted run, and its
// counters and epsilon continue where they were; the episode in flight
// is cut (one more cut in the buffer, every sampled transition still
// valid); and two resumes of one checkpoint end identically, with or
// without checkpoints of their own.
func TestResumeContinuesRun(t *testing.T) {
	root := t.TempDir()
	dirU, dirK := filepath.Join(root, "u"), filepath.Join(root, "k")
	cfgU := smallRun(dirU, 1200, 500)
	var atK snapshot
	var gens []uint64
	cfgU.afterCheckpoint = func(gen uint64, a *Agent, buf *tensorbuf.Buffer) {
		gens = append(gens, gen)
		if len(gens) == 1 {
			atK = snap(t, a, buf)
			copyDir(t, dirU, dirK)
		}
	}
	var histU []Progress
	cfgU.Progress = func(p Progress) { histU = append(histU, p) }
	resU, err := RunCartPole(context.Background(), cfgU)
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoints at 500 (ends at 500), 1000 and the end; only the last
	// generation's files are left.
	if !slices.Equal(gens, []uint64{1, 2, 3}) {
		t.Fatalf("generations %v", gens)
	}
	ents, _ := os.ReadDir(dirU)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{ManifestFile, ReplayFile(3), StateFile(3)}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	ck, err := ReadCheckpoint(dirK)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Generation != 1 || ck.Progress.EnvSteps != 500 || !reflect.DeepEqual(ck.History, histU[:5]) {
		t.Fatalf("checkpoint K: generation %d at %d env steps, history of %d rounds", ck.Generation, ck.Progress.EnvSteps, len(ck.History))
	}

	type outcome struct {
		weights []float32
		eval    float64
		last    Progress
	}
	resumeRun := func(name string, every int) outcome {
		dir := filepath.Join(root, name)
		copyDir(t, dirK, dir)
		cfg := smallRun(dir, 1200, every)
		cfg.Resume = true
		var got snapshot
		var hist []Progress
		cfg.OnResume = func(h []Progress) { hist = h }
		cfg.afterResume = func(a *Agent, buf *tensorbuf.Buffer) { got = snap(t, a, buf) }
		var after []snapshot
		cfg.afterCheckpoint = func(_ uint64, a *Agent, buf *tensorbuf.Buffer) { after = append(after, snap(t, a, buf)) }
		var rounds []Progress
		cfg.Progress = func(p Progress) { rounds = append(rounds, p) }
		res, err := RunCartPole(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.agent, atK.agent) || got.stats != atK.stats || got.cursor != atK.cursor || got.items != atK.items {
			t.Fatalf("%s: resumed state differs from the checkpointed one: stats %+v vs %+v, cursor %d vs %d, items %d vs %d, agent equal %v",
				name, got.stats, atK.stats, got.cursor, atK.cursor, got.items, atK.items, bytes.Equal(got.agent, atK.agent))
		}
		if !reflect.DeepEqual(hist, histU[:5]) {
			t.Fatalf("%s: OnResume history differs from the uninterrupted run's first 5 rounds", name)
		}
		if len(rounds) != 7 {
			t.Fatalf("%s: %d rounds after the resume, want 7", name, len(rounds))
		}
		for i, p := range rounds {
			u := histU[5+i]
			if p.EnvSteps != u.EnvSteps || p.GradientSteps != u.GradientSteps || p.Epsilon != u.Epsilon || p.ValidFraction != 1 {
				t.Fatalf("%s: round %d: env steps %d, gradient steps %d, epsilon %v, valid %v; uninterrupted %d, %d, %v",
					name, i, p.EnvSteps, p.GradientSteps, p.Epsilon, p.ValidFraction, u.EnvSteps, u.GradientSteps, u.Epsilon)
			}
		}
		if every > 0 {
			// The first step after the resume cut the episode in flight.
			wantCuts := atK.stats.Cuts
			if atK.lastNext != tensorbuf.First {
				wantCuts++
			}
			if len(after) == 0 || after[0].stats.Cuts != wantCuts {
				t.Fatalf("%s: cuts after the resume %+v, want %d", name, after, wantCuts)
			}
		}
		return outcome{weights(res.Agent), res.EvalReturn, res.Last}
	}
	a := resumeRun("r1", 500)
	b := resumeRun("r2", 0)
	if !slices.Equal(a.weights, b.weights) || a.eval != b.eval || a.last.Loss != b.last.Loss || a.last.TrainReturn != b.last.TrainReturn ||
		a.last.Episodes != b.last.Episodes {
		t.Fatalf("two resumes of one checkpoint differ: eval %v vs %v, last %+v vs %+v", a.eval, b.eval, a.last, b.last)
	}
	if a.last.EnvSteps != resU.Last.EnvSteps || a.last.GradientSteps != resU.Last.GradientSteps {
		t.Fatalf("resumed run ends at %d env / %d gradient steps, uninterrupted at %d / %d", a.last.EnvSteps, a.last.GradientSteps,
			resU.Last.EnvSteps, resU.Last.GradientSteps)
	}
}

// TestResumeRejects: no checkpoint, a different configuration, damaged
// files and bad checkpoint settings are refused with their sentinels; a
// torn later save (files of a generation the manifest does not name)
// does not matter.
func TestResumeRejects(t *testing.T) {
	dir := t.TempDir()
	cfg := smallRun(dir, 300, 200)
	cfg.LearningStarts = 10_000 // no training: fast
	if _, err := RunCartPole(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	resumeFrom := func(d string, edit func(*TrainConfig)) error {
		c := smallRun(d, 400, 0)
		c.LearningStarts, c.Resume = 10_000, true
		if edit != nil {
			edit(&c)
		}
		_, err := RunCartPole(context.Background(), c)
		return err
	}
	// A save killed after its replay and state files, before its manifest.
	for _, f := range []string{ReplayFile(3), StateFile(3), "." + ManifestFile + ".tmp-123"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := resumeFrom(dir, nil); err != nil {
		t.Fatalf("resume beside a torn save: %v", err)
	}
	// "", "default" and "cpu" name the same learner: a run saved with one
	// resumes with another.
	for _, be := range []string{BackendDefault, BackendCPU} {
		if err := resumeFrom(dir, func(c *TrainConfig) { c.Backend = be }); err != nil {
			t.Errorf("resume with -backend %s of a run saved with the default: %v", be, err)
		}
	}
	if err := resumeFrom(t.TempDir(), nil); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("empty directory: %v, want ErrNoCheckpoint", err)
	}
	err := resumeFrom(dir, func(c *TrainConfig) { c.Gamma = 0.9; c.Agent.Hidden = []int{32} })
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Gamma 0.99 (now 0.9)") || !strings.Contains(err.Error(), "Agent.Hidden [16] (now [32])") {
		t.Errorf("changed configuration: %v", err)
	}
	for _, tc := range []struct {
		file string
		at   func(n int) int
	}{{StateFile(2), func(n int) int { return n / 2 }}, {ReplayFile(2), func(n int) int { return n - 40 }}, {ManifestFile, func(int) int { return 3 }}} {
		d := filepath.Join(t.TempDir(), "c")
		copyDir(t, dir, d)
		p := filepath.Join(d, tc.file)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[tc.at(len(data))] ^= 0x04
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := resumeFrom(d, nil); !errors.Is(err, tensorbuf.ErrCorrupt) {
			t.Errorf("%s with a flipped bit: %v, want ErrCorrupt", tc.file, err)
		}
	}
	for _, c := range []TrainConfig{{CheckpointEvery: -1, CheckpointDir: dir}, {CheckpointEvery: 10}, {Resume: true}} {
		if _, err := RunCartPole(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

// TestResumeLearns stops TestRunCartPoleLearns's run at its checkpoint at
// 4,000 env steps and resumes it in a fresh RunCartPole: the resumed run
// still learns (greedy mean return far above a random policy's 22).
func TestResumeLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("a training run of a few seconds; skipped in -short mode")
	}
	if raceEnabled && os.Getenv("TRAJRING_TRAIN_RACE") == "" {
		t.Skip("slow under the race detector; run without -race, or set TRAJRING_TRAIN_RACE=1")
	}
	dir := t.TempDir()
	cfg := learnsRun()
	cfg.CheckpointDir, cfg.CheckpointEvery = dir, 4_000
	stop, cancel := context.WithCancel(context.Background())
	cfg.afterCheckpoint = func(uint64, *Agent, *tensorbuf.Buffer) { cancel() } // the learner "crashes" after its first checkpoint
	if _, err := RunCartPole(stop, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("first part: %v, want context.Canceled", err)
	}
	cfg.afterCheckpoint, cfg.Resume = nil, true
	res, err := RunCartPole(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed at 4032 env steps: greedy mean return %.1f after %d env steps, %d gradient steps", res.EvalReturn,
		res.Last.EnvSteps, res.Last.GradientSteps)
	if res.EvalReturn < 100 || res.Last.EnvSteps != 8_000 || res.Last.GradientSteps != (8_000/64-7)*32 {
		t.Fatalf("greedy mean return %.1f, want >= 100 (random: about 22); env steps %d, gradient steps %d",
			res.EvalReturn, res.Last.EnvSteps, res.Last.GradientSteps)
	}
}
