package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// demoValues runs the demo and returns the values of its summary line.
func demoValues(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"demo"}, args...), &out, &errb)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", out.String())
	}
	return strings.Fields(lines[2])
}

func TestDemoRunsAndReports(t *testing.T) {
	vals := demoValues(t, "-envs", "8", "-steps", "5000", "-seq", "4", "-batch", "16", "-capacity", "256", "-progress", "0")
	steps, err := strconv.Atoi(vals[0])
	if err != nil || steps < 5000 || steps > 5000+8-1 {
		t.Fatalf("env steps %q, want 5000..5007", vals[0])
	}
	items, _ := strconv.Atoi(vals[3])
	// 8 rows, 256 steps kept per row: at most 8*(256-3) windows of 4 steps.
	if items <= 0 || items > 8*253 {
		t.Fatalf("items %d", items)
	}
	if ret, _ := strconv.ParseFloat(vals[7], 64); ret < 8 || ret > 100 {
		t.Fatalf("average return %v of a random CartPole policy", ret)
	}
}

// TestDemoSteps: -steps N collects between N and N+envs-1 env steps (the
// step driver stops at the first batched step that reaches N); before,
// every run collected one episode per env, so small -steps with many
// envs collected far more.
func TestDemoSteps(t *testing.T) {
	for _, tc := range []struct{ envs, steps int }{
		{1, 50}, {7, 100}, {64, 1000}, {100, 10}, {3, 3},
	} {
		vals := demoValues(t, "-envs", strconv.Itoa(tc.envs), "-steps", strconv.Itoa(tc.steps),
			"-seq", "2", "-batch", "4", "-capacity", "64", "-progress", "0")
		got, err := strconv.Atoi(vals[0])
		if err != nil || got < tc.steps || got > tc.steps+tc.envs-1 {
			t.Errorf("-envs %d -steps %d: collected %s, want %d..%d", tc.envs, tc.steps, vals[0], tc.steps, tc.steps+tc.envs-1)
		}
	}
}

// TestUsageErrors: a usage error prints exactly one line on stderr,
// naming the flag or argument at fault, nothing on stdout, and exits 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the message
	}{
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"demo", "-envs", "0"}, "-envs must be positive, got 0"},
		{[]string{"demo", "-envs", "x"}, `invalid argument "x" for "--envs" flag`},
		{[]string{"demo", "-envs"}, "flag needs an argument: --envs"},
		{[]string{"demo", "-steps=-3"}, "-steps must be positive, got -3"},
		{[]string{"demo", "-seq", "10", "-capacity", "5"}, "-capacity (5) must be at least -seq (10)"},
		{[]string{"demo", "-backend", "tpu"}, `-backend: unknown backend "tpu"`},
		{[]string{"demo", "-metrics-format", "xml"}, `-metrics-format: unknown format "xml"`},
		{[]string{"demo", "-progress", "-1s"}, "-progress must not be negative"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "-nope"}, "unknown flag: -nope"}, // named as typed
		{[]string{"demo", "--nope=1"}, "unknown flag: --nope"},
		{[]string{"bench", "-run", "("}, "-run: error parsing regexp"},
		{[]string{"bench", "-quick", "x"}, `unexpected argument "x"`},
		{[]string{"version", "x"}, `unexpected argument "x"`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		msg := errb.String()
		if code != 2 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, one line containing %q", tc.args, code, out.String(), msg, tc.want)
		}
	}
}

func TestNoCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "Available Commands:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestRunFailure: a failure of the job (not of the command line) exits 1
// with one message.
func TestRunFailure(t *testing.T) {
	var out, errb bytes.Buffer
	bad := filepath.Join(t.TempDir(), "missing", "m.jsonl")
	code := run([]string{"demo", "-envs", "2", "-steps", "10", "-metrics", bad, "-progress", "0"}, &out, &errb)
	if msg := errb.String(); code != 1 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "trajring demo: -metrics: open ") {
		t.Errorf("exit %d, stderr %q; want exit 1 and one -metrics message", code, msg)
	}
}

// TestHelp: every command describes itself in -h, -help and --help, on
// stdout, with exit 0; the root help lists the commands in order.
func TestHelp(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"demo", "step driver"},
		{"bench", "plain copy"},
		{"train", "DQN"},
		{"inspect", "checkpoint"},
		{"serve", "JetStream"},
		{"actor", "publish"},
		{"eval", "greedily"},
		{"export", ".npz"},
		{"version", "module version"},
	} {
		for _, h := range []string{"-h", "-help", "--help"} {
			var out, errb bytes.Buffer
			code := run([]string{c.name, h}, &out, &errb)
			if code != 0 || errb.Len() != 0 || !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), "Usage:") {
				t.Errorf("%s %s: exit %d, stderr %q, stdout:\n%s", c.name, h, code, errb.String(), out.String())
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("trajring -h: exit %d", code)
	}
	var names []string
	sc := bufio.NewScanner(&out)
	listing := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Available Commands:") {
			listing = true
			continue
		}
		if listing && strings.TrimSpace(line) == "" {
			break
		}
		if listing {
			names = append(names, strings.Fields(line)[0])
		}
	}
	if want := []string{"demo", "bench", "train", "eval", "inspect", "export", "serve", "actor", "version", "help"}; !slices.Equal(names, want) {
		t.Errorf("commands %q, want %q", names, want)
	}
}

func TestLongFlags(t *testing.T) {
	root := newRootCmd(nil, nil)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"demo", "-envs", "8", "-steps=10"}, []string{"demo", "--envs", "8", "--steps=10"}},
		{[]string{"demo", "-h"}, []string{"demo", "-h"}},
		{[]string{"demo", "-help"}, []string{"demo", "--help"}},
		{[]string{"demo", "-steps", "-5"}, []string{"demo", "--steps", "-5"}},
		{[]string{"demo", "-metrics", "-out.jsonl"}, []string{"demo", "--metrics", "-out.jsonl"}},
		{[]string{"demo", "--metrics", "-x"}, []string{"demo", "--metrics", "-x"}},
		{[]string{"bench", "-quick", "-no-go-peer"}, []string{"bench", "--quick", "--no-go-peer"}},
		{[]string{"demo", "--", "-envs"}, []string{"demo", "--", "-envs"}},
	} {
		if got := longFlags(root, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("longFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	goLine := "go " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "trajring ") || lines[len(lines)-1] != goLine {
		t.Errorf("version output:\n%s\nwant trajring <version> first and %q last", out.String(), goLine)
	}

	for _, tc := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/trajring/trajring", Version: "v0.3.0"}},
			true, "trajring v0.3.0\nmodule github.com/trajring/trajring\ngo go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/trajring/trajring", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "a903e4f"}, {Key: "vcs.modified", Value: "true"}}},
			true, "trajring (devel)\nmodule github.com/trajring/trajring\nrevision a903e4f (modified)\ngo go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{nil, false, "trajring unknown\nmodule github.com/trajring/trajring\ngo " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
	} {
		var b bytes.Buffer
		writeVersion(&b, tc.bi, tc.ok)
		if b.String() != tc.want {
			t.Errorf("writeVersion:\n%s\nwant:\n%s", b.String(), tc.want)
		}
	}
}

// TestDemoMetrics: -metrics writes MetricsLog records (JSON lines or CSV,
// by flag or by the file's extension), the last one at the final count.
func TestDemoMetrics(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file, format string
		csv          bool
	}{
		{"m.jsonl", "", false},
		{"m.csv", "", true},
		{"m.txt", "csv", true},
	} {
		path := filepath.Join(dir, tc.file)
		args := []string{"-envs", "4", "-steps", "400", "-seq", "2", "-batch", "4", "-capacity", "64", "-progress", "0",
			"-metrics", path, "-metrics-every", "100"}
		if tc.format != "" {
			args = append(args, "-metrics-format", tc.format)
		}
		vals := demoValues(t, args...)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var last string
		if tc.csv {
			if lines[0] != "env_steps,episodes,average_return,average_episode_length" {
				t.Errorf("%s: header %q", tc.file, lines[0])
			}
			lines = lines[1:]
			last = strings.Split(lines[len(lines)-1], ",")[0]
		} else {
			var rec struct {
				EnvSteps int64 `json:"env_steps"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
			last = strconv.FormatInt(rec.EnvSteps, 10)
		}
		// 400 steps, a record every 100: 4 records (the last one at 400..403).
		if len(lines) != 4 || last != vals[0] {
			t.Errorf("%s: %d records, last at %s env steps, demo collected %s:\n%s", tc.file, len(lines), last, vals[0], b)
		}
	}
}

// TestDemoSizeErrors: sizes the machine cannot hold, or that the learner
// could never sample, are usage errors naming the flags (exit 2, one
// line), found before the environments are allocated; before, -envs 1e8
// died in the runtime's out-of-memory abort, -envs MaxInt64 panicked in
// makeslice, and the others exited 1 with tensorbuf's message or ran a
// learner that never sampled.
func TestDemoSizeErrors(t *testing.T) {
	defer func(f func() (int64, error)) { demoMemAvailable = f }(demoMemAvailable)
	demoMemAvailable = func() (int64, error) { return 64 << 20, nil }
	_, memErr := cpu.MemAvailable()
	want20000 := "-envs 20000: the demo needs about 82740000 bytes of host memory (4096 per env, 820000 for the buffer) but 67108864 bytes are available"
	if cudaBuild { // the rings are device memory
		want20000 = "-envs 20000: the demo needs about 81920000 bytes of host memory (4096 per env, 0 for the buffer) but 67108864 bytes are available"
	}
	for _, tc := range []struct {
		args     []string
		want     string
		needsMem bool // refused by tensorbuf's memory check, which needs the host's figure
	}{
		{[]string{"-envs", "20000", "-capacity", "1", "-seq", "1", "-batch", "1"}, want20000, false},
		{[]string{"-envs", "9223372036854775807"}, "-envs 9223372036854775807 x -capacity 4096: tensorbuf: invalid configuration", false},
		{[]string{"-capacity", "1000000000000", "-seq", "1000000000000", "-batch", "1"}, "-envs 64 x -capacity 1000000000000: tensorbuf: invalid configuration", false},
		{[]string{"-envs", "100000000"}, "-envs 100000000 x -capacity 4096: tensorbuf: invalid configuration", true},
		{[]string{"-batch", "100000000"}, "-batch 100000000 exceeds the 261696 sequences the buffer can hold", false},
		{[]string{"-envs", "1", "-capacity", "1000000", "-seq", "1000", "-batch", "900000"},
			"-batch 900000 x -seq 1000: a learner batch of 40-byte steps exceeds the sample limit of 67108864 bytes", false},
	} {
		if tc.needsMem && memErr != nil {
			t.Logf("%q: skipped, host memory not known here (%v)", tc.args, memErr)
			continue
		}
		var out, errb bytes.Buffer
		code := run(append([]string{"demo", "-progress", "0"}, tc.args...), &out, &errb)
		msg := errb.String()
		if code != 2 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, one line containing %q", tc.args, code, out.String(), msg, tc.want)
		}
	}
}

// TestDemoEnvBytes: demoEnvBytes bounds what a demo allocates per env
// besides the buffer's rings: every allocation of a short run (live or
// not, so at least its peak) over 10000 envs, divided by the envs.
func TestDemoEnvBytes(t *testing.T) {
	const envs = 10000
	c := demoConfig{envs: envs, steps: 2 * envs, seqLen: 1, batch: 1, capacity: 2, backend: "cpu", seed: 1}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := demo(context.Background(), c, io.Discard); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / envs; per > demoEnvBytes {
		t.Errorf("a demo of %d envs allocated %d bytes per env, above demoEnvBytes (%d)", envs, per, demoEnvBytes)
	} else {
		t.Logf("%d bytes allocated per env (demoEnvBytes %d)", per, demoEnvBytes)
	}
}
