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

// TestTrainBackend: -backend takes default, cpu and gpu, and anything
// else exits 2 naming the flag. In a default build -backend gpu exits 2
// saying it needs a trajring_cuda build. In a cuda build it trains the
// device learner: every training round of metrics.jsonl reports 0
// device-to-host bytes per gradient step (uniform replay), its gradient
// steps/s and the backend's launches per gradient step, syncs per round
// (at most 1) and device-to-host copies per env step (0 once training
// started), q.gob plays in eval, and -resume continues the
// checkpointed run on the gpu and refuses -backend cpu.
func TestTrainBackend(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	for _, tc := range []struct {
		backend string
		want    string
	}{
		{"tpu", "-backend tpu: want default, cpu or gpu"},
		{"GPU", "-backend GPU: want default, cpu or gpu"},
	} {
		var o, e bytes.Buffer
		if code := run([]string{"train", "-backend", tc.backend, "-out", out}, &o, &e); code != 2 || strings.Count(e.String(), "\n") != 1 ||
			!strings.Contains(e.String(), tc.want) {
			t.Errorf("-backend %q: exit %d, stderr %q; want exit 2, one line containing %q", tc.backend, code, e.String(), tc.want)
		}
	}
	args := []string{"train", "-backend", "gpu", "-steps", "1500", "-checkpoint-every", "1000", "-out", out, "-hidden", "16", "-batch", "16",
		"-buffer", "5000", "-per=false", "-learning-starts", "500", "-train-freq", "100", "-gradient-steps", "4", "-eval-every", "0",
		"-eval-episodes", "2", "-progress", "0"}
	var o, e bytes.Buffer
	code := run(args, &o, &e)
	if !cudaBuild {
		if want := "-backend gpu: want cpu: this build has no gpu learner (build with -tags trajring_cuda)"; code != 2 || !strings.Contains(e.String(), want) {
			t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, e.String(), want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("a refused run created %s (%v)", out, err)
		}
		return
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if want := "device-to-host: 0 bytes per gradient step in the last round"; !strings.Contains(o.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, o.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 15 {
		t.Fatalf("metrics.jsonl has %d lines, want 15", len(lines))
	}
	growths, trainRounds := 0, 0
	for i, l := range lines {
		var p dqn.Progress
		if err := json.Unmarshal([]byte(l), &p); err != nil || !strings.Contains(l, `"d2h_bytes_per_grad_step":0,`) {
			t.Fatalf("metrics line %d: %q (%v)", i, l, err)
		}
		if trains := p.EnvSteps > 500; trains != (p.GradStepsPerSec > 0) || trains != (p.GradientSteps > 0) {
			t.Fatalf("metrics line %d: %d env steps, %d gradient steps at %v a second", i, p.EnvSteps, p.GradientSteps, p.GradStepsPerSec)
		}
		// The backend's counts (issue 42): every line has them; a
		// training round launches kernels, waits for the device once,
		// and acting copies nothing back per env step (the policy's host
		// copy of the network comes with the round's wait; the first
		// round, before any training, copies the weights once).
		for _, k := range []string{`"launches_per_grad_step":`, `"syncs_per_round":`, `"d2h_copies_per_env_step":`, `"graph_launches_per_round":`} {
			if !strings.Contains(l, k) {
				t.Fatalf("metrics line %d lacks %s: %q", i, k, l)
			}
		}
		trains := p.EnvSteps > 500
		if p.SyncsPerRound == 2 {
			growths++ // the table's device mirror grew (it frees the old one)
		}
		if trains != (p.LaunchesPerGradStep > 0) || p.LaunchesPerGradStep > 64 || p.SyncsPerRound > 2 || growths > 2 {
			t.Fatalf("metrics line %d: %v launches a gradient step, %d syncs a round (%d rounds with 2); want some launches and 1 sync (2 in rounds in which the mirror grows)",
				i, p.LaunchesPerGradStep, p.SyncsPerRound, growths)
		}
		// The first training round replays its captured step, one graph
		// a gradient step; every later round is one graph (a recorded
		// round: dqn.RecordRound).
		want := int64(0)
		if trains {
			want = 1
			if trainRounds == 0 {
				want = 4
			}
			trainRounds++
		}
		if p.GraphLaunchesPerRound != want {
			t.Fatalf("metrics line %d: %d graph launches in a round (%d env steps); want %d (the first training round one a gradient step, then one a round)", i, p.GraphLaunchesPerRound, p.EnvSteps, want)
		}
		if want := 0.0; i == 0 && p.D2HCopiesPerEnvStep != 1.0/100 || i > 0 && p.D2HCopiesPerEnvStep != want {
			t.Fatalf("metrics line %d: %v device-to-host copies an env step; want 1 a round before training, then 0", i, p.D2HCopiesPerEnvStep)
		}
	}
	var ev bytes.Buffer
	if code := run([]string{"eval", "-episodes", "3", filepath.Join(out, "q.gob")}, &ev, &e); code != 0 ||
		!strings.Contains(ev.String(), "(layers [4 16 2]): mean return over 3 greedy episodes") {
		t.Fatalf("eval of q.gob: exit %d:\n%s%s", code, ev.String(), e.String())
	}
	o.Reset()
	if code := run([]string{"train", "-resume", "-out", out, "-steps", "2000", "-progress", "0"}, &o, &e); code != 0 ||
		!strings.Contains(o.String(), "resumed from the checkpoint in "+out+" at 1500 env steps") ||
		!strings.Contains(o.String(), "env steps 2000, gradient steps 60,") {
		t.Fatalf("resume: exit %d:\n%s%s", code, o.String(), e.String())
	}
	e.Reset()
	want := "-backend cpu: the run in " + out + " was trained with -backend gpu"
	if code := run([]string{"train", "-resume", "-out", out, "-backend", "cpu", "-progress", "0"}, &o, &e); code != 2 || !strings.Contains(e.String(), want) {
		t.Fatalf("resume on the cpu: exit %d, stderr %q; want exit 2 and %q", code, e.String(), want)
	}
}
