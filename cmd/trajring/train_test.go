package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/agents/dqn"
)

// TestTrainUsageErrors: every bad flag value, the command's own and those
// dqn.TrainConfig.Validate refuses (zeros that make no sense included, and
// sizes that would not fit in memory), exits 2 before anything is written
// with one line naming the flag and what it wants.
func TestTrainUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-env", "Pong"}, `-env: unknown environment "Pong"`},
		{[]string{"-hidden", "3,x"}, `-hidden: bad layer size "x"`},
		{[]string{"-hidden", "100000000"}, "-hidden 100000000: want layer sizes from 1 to 16777216"},
		{[]string{"-hidden", "16777216,16777216"}, "-hidden 16777216,16777216: want smaller layers: there is not memory for it"},
		{[]string{"-steps", "0"}, "-steps must be positive, got 0"},
		{[]string{"-per=maybe"}, `invalid argument "maybe" for "--per" flag`},
		{[]string{"-checkpoint-every", "-5"}, "-checkpoint-every must not be negative, got -5"},
		{[]string{"-batch", "-1"}, "-batch -1: want at least 1"},
		{[]string{"-batch", "0"}, "-batch 0: want at least 1"},
		{[]string{"-batch", "1e8"}, `invalid argument "1e8" for "--batch" flag`},
		{[]string{"-batch", "100000000"}, "-batch 100000000: want at most the replay capacity, 100000"},
		{[]string{"-batch", "100000000", "-buffer", "1000000000"}, "-batch 100000000: want a smaller batch: there is not memory for it"},
		{[]string{"-lr", "NaN"}, "-lr NaN: want a positive finite number"},
		{[]string{"-lr", "0"}, "-lr 0: want a positive finite number"},
		{[]string{"-lr", "-0.001"}, "-lr -0.001: want a positive finite number"},
		{[]string{"-lr", "Inf"}, "-lr +Inf: want a positive finite number"},
		{[]string{"-lr-end", "-1"}, "-lr-end -1: want a finite number at least 0"},
		{[]string{"-lr-end", "NaN"}, "-lr-end NaN: want a finite number at least 0"},
		{[]string{"-gamma", "2"}, "-gamma 2: want a number from 0 to 1"},
		{[]string{"-gamma", "NaN"}, "-gamma NaN: want a number from 0 to 1"},
		{[]string{"-buffer", "1"}, "-buffer 1: want at least 2"},
		{[]string{"-buffer", "0"}, "-buffer 0: want at least 2"},
		{[]string{"-n-step", "0"}, "-n-step 0: want from 1 to 99999, below the replay capacity"},
		{[]string{"-n-step", "100000"}, "-n-step 100000: want from 1 to 99999, below the replay capacity"},
		{[]string{"-target-update", "0"}, "-target-update 0: want at least 1"},
		{[]string{"-train-freq", "0"}, "-train-freq 0: want at least 1"},
		{[]string{"-learning-starts", "-1"}, "-learning-starts -1: want at least 0"},
		{[]string{"-gradient-steps", "-1"}, "-gradient-steps -1: want at least 0"},
		{[]string{"-exploration-fraction", "1.5"}, "-exploration-fraction 1.5: want a number from 0 to 1"},
		{[]string{"-exploration-final-eps", "-0.5"}, "-exploration-final-eps -0.5: want a number from 0 to 1"},
		{[]string{"-alpha", "0"}, "-alpha 0: want a positive finite number"},
		{[]string{"-alpha", "-1"}, "-alpha -1: want a positive finite number"},
		{[]string{"-beta", "1.5"}, "-beta 1.5: want a number from 0 to 1"},
		{[]string{"-max-grad-norm", "0"}, "-max-grad-norm 0: want a positive norm, or negative for no clipping"},
		{[]string{"-max-grad-norm", "NaN"}, "-max-grad-norm NaN: want a positive norm, or negative for no clipping"},
		{[]string{"-eval-episodes", "0"}, "-eval-episodes 0: want at least 1"},
		// 1e10 episodes would take about 40 TB at once, more than any
		// machine this runs on.
		{[]string{"-eval-episodes", "10000000000"}, "-eval-episodes 10000000000: want fewer episodes: one evaluation runs them all at once"},
		{[]string{"-eval-every", "-1"}, "-eval-every -1: want at least 0 (0: no evaluations during training)"},
		{[]string{"-stop-return", "NaN"}, "-stop-return NaN: want a number (0 or negative: never stop early)"},
		// Issue 39: an empty -out is named (before: "checkpoints and resume
		// need a CheckpointDir", or exit 1 with "mkdir : no such file or
		// directory"), and a rising learning rate is refused.
		{[]string{"-out", ""}, `-out: name the directory`},
		{[]string{"-out", "", "-checkpoint-every", "0"}, `-out: name the directory`},
		{[]string{"-out", "", "-resume"}, `-out: name the directory`},
		{[]string{"-lr-end", "0.01"}, "-lr-end 0.01: want at most -lr 0.0023 (the learning rate falls"},
		{[]string{"-lr", "0.001", "-lr-end", "0.0011"}, "-lr-end 0.0011: want at most -lr 0.001"},
	} {
		args := append([]string{"train", "-out", out}, tc.args...)
		var o, errb bytes.Buffer
		code := run(args, &o, &errb)
		if msg := errb.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2, one line containing %q", tc.args, code, msg, tc.want)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run created %s (%v)", out, err)
	}
}

// TestTrainZerosAreUsed: zeros the user types are used as given, never
// replaced by the defaults (gamma 0, no learning starts, no gradient
// steps, no exploration, beta 0 and a learning rate falling to 0): the
// checkpoint's configuration holds them, epsilon is 0 from the first
// round and no gradient step is taken.
func TestTrainZerosAreUsed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"train", "-steps", "300", "-hidden", "8", "-batch", "8", "-train-freq", "100", "-checkpoint-every", "300",
		"-eval-every", "0", "-eval-episodes", "2", "-progress", "0", "-out", out,
		"-gamma", "0", "-learning-starts", "0", "-gradient-steps", "0", "-exploration-fraction", "0",
		"-exploration-final-eps", "0", "-beta", "0", "-lr-end", "0"}
	var o, e bytes.Buffer
	if code := run(args, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	ck, err := dqn.ReadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	got := []float64{c.Gamma, float64(c.LearningStarts), float64(c.GradientSteps), c.ExplorationFraction, c.ExplorationFinalEps,
		c.Beta, c.LearningRateEnd}
	if !slices.Equal(got, make([]float64, len(got))) {
		t.Fatalf("gamma, learning starts, gradient steps, exploration fraction, final epsilon, beta, final lr = %v, want all 0", got)
	}
	for i, p := range ck.History {
		if p.Epsilon != 0 || p.GradientSteps != 0 || p.EvalReturn != nil {
			t.Fatalf("round %d: epsilon %v, gradient steps %d, eval %v; want 0, 0, none", i, p.Epsilon, p.GradientSteps, p.EvalReturn)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 || strings.Contains(string(data), "eval_return") {
		t.Fatalf("metrics.jsonl: %d lines, want 3 without eval_return:\n%s", n, data)
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
	// -backend cpu names the learner the run was trained with (-backend
	// default): resumable.
	if code := run([]string{"train", "-resume", "-out", out, "-steps", "4000", "-progress", "0", "-backend", "cpu"}, &o, &e); code != 0 {
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
		code int
		want string
	}{
		{[]string{"-out", filepath.Join(dir, "none")}, 1, "no checkpoint to resume from"},
		{[]string{"-out", out, "-gamma", "0.9"}, 2, "-gamma 0.9: the run in " + out + " was trained with -gamma 0.99"},
		{[]string{"-out", out, "-lr", "0.01"}, 2, "-lr 0.01: the run in " + out + " was trained with -lr 0.0023"},
		{[]string{"-out", out, "-hidden", "32"}, 2, "-hidden 32: the run in " + out + " was trained with -hidden 16"},
		{[]string{"-out", out, "-per=false"}, 2, "-per false: the run in " + out + " was trained with -per true"},
		{[]string{"-out", out, "-seed", "2"}, 2, "-seed 2: the run in " + out + " was trained with -seed 1"},
		{[]string{"-out", out, "-steps", "5000", "-eval-episodes", "-1"}, 2, "-eval-episodes -1: want at least 1"},
	} {
		var o, e bytes.Buffer
		args := append([]string{"train", "-resume", "-progress", "0"}, tc.args...)
		if code := run(args, &o, &e); code != tc.code || strings.Count(e.String(), "\n") != 1 || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, one line containing %q", tc.args, code, e.String(), tc.code, tc.want)
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

// TestTrainBestAndLast: with evaluations, train writes the best network
// (best.gob) besides the last (q.gob), the curve as SVG and PNG, and
// eval_return only on the rounds that evaluated; its last two lines are
// the last and the best network's final evaluations, which eval
// reproduces on the same episodes (the evaluation seed after the
// periodic ones); without evaluations the last network is the one
// evaluated and an old best.gob is removed.
func TestTrainBestAndLast(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"train", "-steps", "1200", "-hidden", "16", "-batch", "16", "-learning-starts", "200", "-train-freq", "100",
		"-gradient-steps", "4", "-eval-every", "400", "-eval-episodes", "5", "-checkpoint-every", "0", "-progress", "0", "-out", out}
	var o, e bytes.Buffer
	if code := run(args, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	lines := strings.Split(strings.TrimSpace(o.String()), "\n")
	var last, best float64
	var at int64
	n1, err1 := fmt.Sscanf(lines[len(lines)-2], "last network (q.gob, 1200 env steps): mean return over 5 greedy episodes: %f", &last)
	n2, err2 := fmt.Sscanf(lines[len(lines)-1], "mean return over 5 greedy episodes: %f (best, found at %d env steps)", &best, &at)
	if n1 != 1 || n2 != 2 || err1 != nil || err2 != nil || at%400 != 0 {
		t.Fatalf("output:\n%s", o.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var evalSteps []int64
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var p dqn.Progress
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if p.EvalReturn != nil {
			evalSteps = append(evalSteps, p.EnvSteps)
		}
		if (p.EvalReturn != nil) != strings.Contains(l, `"eval_return"`) {
			t.Fatalf("metrics line %q", l)
		}
	}
	if !slices.Equal(evalSteps, []int64{400, 800, 1200}) {
		t.Fatalf("evaluations at %v, want 400 800 1200", evalSteps)
	}
	png, err := os.ReadFile(filepath.Join(out, "curve.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("curve.png: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "curve.svg")); err != nil {
		t.Fatal(err)
	}
	seed := uint64(1) + 1_000_003 + uint64(len(evalSteps))*0x9e3779b97f4a7c15
	for model, want := range map[string]float64{"q.gob": last, "best.gob": best} {
		var eo bytes.Buffer
		path := filepath.Join(out, model)
		if code := run([]string{"eval", path, "-episodes", "5", "-seed", fmt.Sprint(seed)}, &eo, &e); code != 0 ||
			!strings.Contains(eo.String(), fmt.Sprintf("mean return over 5 greedy episodes: %.1f (", want)) {
			t.Errorf("eval %s: exit %d: %s%s; want the mean %.1f", model, code, eo.String(), e.String(), want)
		}
	}
	o.Reset()
	if code := run(append(args, "-eval-every", "0"), &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.HasSuffix(o.String(), " (last, at 1200 env steps; no evaluations chose a best network)\n") || strings.Contains(o.String(), "best.gob") {
		t.Fatalf("output without evaluations:\n%s", o.String())
	}
	if _, err := os.Stat(filepath.Join(out, "best.gob")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("best.gob of the earlier run left behind: %v", err)
	}
	o.Reset()
	if code := run(append(args, "-stop-return", "1"), &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "stopped at 400 env steps: the evaluation there reached -stop-return 1\n") ||
		!strings.Contains(o.String(), "last network (q.gob, 400 env steps)") || !strings.Contains(o.String(), "(best, found at 400 env steps)") {
		t.Fatalf("output of a run stopped at the first evaluation:\n%s", o.String())
	}
}

// TestTrainCompress: train's replay checkpoints are zstd-compressed by
// default and raw with -compress=false.
func TestTrainCompress(t *testing.T) {
	size := map[string]int64{}
	for _, compress := range []string{"true", "false"} {
		out := filepath.Join(t.TempDir(), "run")
		args := []string{"train", "-steps", "300", "-hidden", "8", "-batch", "8", "-train-freq", "100", "-checkpoint-every", "300",
			"-eval-every", "0", "-eval-episodes", "2", "-progress", "0", "-out", out, "-compress=" + compress}
		var o, e bytes.Buffer
		if code := run(args, &o, &e); code != 0 {
			t.Fatalf("-compress=%s: exit %d: %s", compress, code, e.String())
		}
		files, err := filepath.Glob(filepath.Join(out, "replay-*.ckpt"))
		if err != nil || len(files) != 1 {
			t.Fatalf("-compress=%s: replay checkpoints %v, %v", compress, files, err)
		}
		st, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		size[compress] = st.Size()
	}
	if size["true"] >= size["false"] {
		t.Errorf("compressed replay checkpoint %d bytes, raw %d: want the compressed one smaller", size["true"], size["false"])
	}
}

// TestTrainFailureLeavesNoEmptyOut: a run that fails before writing
// anything (here: -resume with no checkpoint, reaching RunCartPole) removes
// the -out directory it created, and keeps one that existed before.
func TestTrainFailureLeavesNoEmptyOut(t *testing.T) {
	for _, existed := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "run")
		if existed {
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		f := trainFlags{cfg: dqn.DefaultTrainConfig(), out: out}
		f.cfg.Resume, f.cfg.CheckpointDir = true, out
		var o, e bytes.Buffer
		if err := runTrain(f, &o, &e); !errors.Is(err, dqn.ErrNoCheckpoint) {
			t.Fatalf("existed %v: %v, want ErrNoCheckpoint", existed, err)
		}
		if _, err := os.Stat(out); existed != (err == nil) {
			t.Errorf("existed %v: after the failed run Stat(-out) = %v", existed, err)
		}
	}
}
