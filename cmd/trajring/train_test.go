//go:build !cuda

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trajring/trajring/agents/dqn"
)

func TestTrainUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "-env", "Pong"}, `-env: unknown environment "Pong"`},
		{[]string{"train", "-hidden", "3,x"}, `-hidden: bad layer size "x"`},
		{[]string{"train", "-steps", "0"}, "-steps must be positive, got 0"},
		{[]string{"train", "-per=maybe"}, `invalid argument "maybe" for "--per" flag`},
		{[]string{"train", "-checkpoint-every", "-5"}, "-checkpoint-every must not be negative, got -5"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if msg := errb.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2, one line containing %q", tc.args, code, msg, tc.want)
		}
	}
}

// TestTrainCheckpointAndResume: a small run checkpoints every 1000 env
// steps; -resume continues it (its saved configuration, -steps extended)
// with metrics.jsonl rewritten up to the checkpoint and then carried on;
// -resume without a checkpoint, or with a changed learner flag, fails
// with one line (exit 1).
func TestTrainCheckpointAndResume(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	var o, e bytes.Buffer
	args := []string{"train", "-steps", "3000", "-checkpoint-every", "1000", "-out", out, "-hidden", "16", "-batch", "16", "-buffer", "10000",
		"-learning-starts", "500", "-train-freq", "100", "-gradient-steps", "2", "-eval-every", "0", "-eval-episodes", "2", "-progress", "0"}
	if code := run(args, &o, &e); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "checkpoint: "+filepath.Join(out, "checkpoint.json")) {
		t.Fatalf("first run output:\n%s", o.String())
	}
	ck, err := dqn.ReadCheckpoint(out)
	if err != nil || ck.Progress.EnvSteps != 3000 || ck.Generation != 3 {
		t.Fatalf("checkpoint after the first run: %+v, %v", ck, err)
	}
	var info bytes.Buffer
	if code := run([]string{"inspect", ck.ReplayPath}, &info, &e); code != 0 || !strings.Contains(info.String(), "1 rows x 10002 steps") {
		t.Fatalf("inspect of the replay checkpoint: exit %d:\n%s%s", code, info.String(), e.String())
	}
	o.Reset()
	if code := run([]string{"train", "-resume", "-out", out, "-steps", "4000", "-progress", "0"}, &o, &e); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "resumed from the checkpoint in "+out+" at 3000 env steps") ||
		!strings.Contains(o.String(), "env steps 4000, gradient steps 70,") {
		t.Fatalf("resume output:\n%s", o.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 40 {
		t.Fatalf("metrics.jsonl has %d lines, want 40", len(lines))
	}
	for i, l := range lines {
		var p dqn.Progress
		if err := json.Unmarshal([]byte(l), &p); err != nil || p.EnvSteps != int64(100*(i+1)) {
			t.Fatalf("metrics line %d: %q (%v)", i, l, err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "-resume", "-out", filepath.Join(dir, "none"), "-progress", "0"}, "no checkpoint to resume from"},
		{[]string{"train", "-resume", "-out", out, "-gamma", "0.9", "-progress", "0"}, "Gamma 0.99 (now 0.9)"},
	} {
		var o, e bytes.Buffer
		if code := run(tc.args, &o, &e); code != 1 || strings.Count(e.String(), "\n") != 1 || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1, one line containing %q", tc.args, code, e.String(), tc.want)
		}
	}
}

// TestTrainMetrics: -metrics writes the collection's MetricsLog records
// (here CSV, chosen by the extension): a header and one record per
// -metrics-every env steps, env steps increasing to the run's end, and a
// bad -metrics-format is a usage error.
func TestTrainMetrics(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "m.csv")
	var out, errb bytes.Buffer
	args := []string{"train", "-steps", "1200", "-learning-starts", "200", "-train-freq", "200", "-gradient-steps", "2",
		"-hidden", "8", "-eval-episodes", "2", "-eval-every", "0", "-checkpoint-every", "0", "-progress", "0",
		"-out", filepath.Join(dir, "run"), "-metrics", csv, "-metrics-every", "400"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	raw, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if lines[0] != "env_steps,episodes,average_return,average_episode_length" {
		t.Fatalf("header %q", lines[0])
	}
	var steps []string
	for _, l := range lines[1:] {
		steps = append(steps, strings.SplitN(l, ",", 2)[0])
	}
	// Records after 400, 800 and 1200 steps (the final Flush adds none:
	// nothing was observed after the last record).
	if got := strings.Join(steps, " "); got != "400 800 1200" {
		t.Fatalf("records at env steps %q, want 400 800 1200\n%s", got, raw)
	}
	errb.Reset()
	if code := run([]string{"train", "-metrics-format", "xml"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `-metrics-format: unknown format "xml"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
