//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trajring/trajring/agents/dqn"
)

// buildTrainBinary builds the command into a temporary directory and returns
// the binary's path.
func buildTrainBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short mode")
	}
	return buildTrajring(t, t.TempDir())
}

// waitTrain polls until ok holds, failing after 60 s.
func waitTrain(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// globExists reports whether a file matching the glob pattern exists.
func globExists(pattern string) bool {
	m, _ := filepath.Glob(pattern)
	return len(m) > 0
}

// TestTrainSignal: a real SIGINT (or SIGTERM) to a running `trajring
// train` ends the run as a stop does: exit 130 (143), one line on stderr
// naming what was written and the checkpoint, q.gob and best.gob that
// eval plays, metrics.jsonl ending where the checkpoint is, and a
// -resume that continues from there; without checkpoints the line says
// there is none. Before, the signal killed train (Go's default action)
// before it wrote q.gob or best.gob.
func TestTrainSignal(t *testing.T) {
	bin := buildTrainBinary(t)
	for _, tc := range []struct {
		sig        syscall.Signal
		code       int
		checkpoint string
		name       string
	}{
		{syscall.SIGINT, 130, "500", "SIGINT"},
		{syscall.SIGTERM, 143, "500", "SIGTERM"},
		{syscall.SIGINT, 130, "0", "SIGINT"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		cmd := exec.Command(bin, smallTrain(out, "1000000", "-checkpoint-every", tc.checkpoint)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Past the first checkpoint (500 env steps), or the first round,
		// and then some: the first evaluation (200 env steps) has chosen
		// a best network.
		waitTrain(t, "the run to train", func() bool {
			if tc.checkpoint != "0" {
				return globExists(filepath.Join(out, dqn.ManifestFile))
			}
			return globExists(filepath.Join(out, ".metrics.jsonl.tmp-*"))
		})
		time.Sleep(300 * time.Millisecond)
		if err := cmd.Process.Signal(tc.sig); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
			t.Fatalf("%s: %v, want exit %d; stderr %q", tc.name, err, tc.code, stderr.String())
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: exited %v after the signal", tc.name, d)
		}
		msg := stderr.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "trajring train: interrupted ("+tc.name+"): stopped at ") ||
			!strings.Contains(msg, filepath.Join(out, "q.gob")) || !strings.Contains(msg, filepath.Join(out, "best.gob")) {
			t.Fatalf("%s: stderr %q: want one line naming q.gob and best.gob", tc.name, msg)
		}
		for _, model := range []string{"q.gob", "best.gob"} {
			var o, e bytes.Buffer
			if code := run([]string{"eval", filepath.Join(out, model), "-episodes", "2"}, &o, &e); code != 0 {
				t.Fatalf("%s: eval %s: exit %d: %s", tc.name, model, code, e.String())
			}
		}
		for _, f := range []string{"metrics.jsonl", "curve.svg", "curve.png"} {
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
		if left := globExists(filepath.Join(out, ".*.tmp-*")); left {
			t.Errorf("%s: temporary files left in %s", tc.name, out)
		}
		if tc.checkpoint == "0" {
			if !strings.Contains(msg, "no checkpoint (checkpoints are off") {
				t.Errorf("stderr %q: want it to say there is no checkpoint", msg)
			}
			continue
		}
		if !strings.Contains(msg, "checkpoint "+filepath.Join(out, dqn.ManifestFile)+" (resume with -resume -out "+out+")") {
			t.Fatalf("%s: stderr %q: want it to name the checkpoint", tc.name, msg)
		}
		ck, err := dqn.ReadCheckpoint(out)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != len(ck.History) {
			t.Errorf("%s: metrics.jsonl has %d lines, the checkpoint %d rounds", tc.name, len(lines), len(ck.History))
		}
		at := ck.Progress.EnvSteps
		if !strings.Contains(msg, "stopped at "+itoa(at)+" env steps") {
			t.Errorf("%s: stderr %q, checkpoint at %d env steps", tc.name, msg, at)
		}
		var o, e bytes.Buffer
		if code := run([]string{"train", "-resume", "-out", out, "-steps", itoa(at + 300), "-progress", "0"}, &o, &e); code != 0 {
			t.Fatalf("%s: resume: exit %d: %s", tc.name, code, e.String())
		}
		if !strings.Contains(o.String(), "resumed from the checkpoint in "+out+" at "+itoa(at)+" env steps") ||
			!strings.Contains(o.String(), "env steps "+itoa(at+300)+",") {
			t.Fatalf("%s: resume output:\n%s", tc.name, o.String())
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTrainNetworksAtomic: a second run into the same -out whose writes
// fail (a file size limit, `ulimit -f`: EFBIG) or that is killed (kill
// -9) while it writes its networks leaves the first run's q.gob and
// best.gob whole, or the second run's complete ones, never a partial
// file (before: q.gob was written in place, and eval of it failed with
// "unexpected EOF").
func TestTrainNetworksAtomic(t *testing.T) {
	bin := buildTrainBinary(t)
	out := filepath.Join(t.TempDir(), "run")
	var o, e bytes.Buffer
	if code := run(smallTrain(out, "400", "-checkpoint-every", "0"), &o, &e); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, e.String())
	}
	old := map[string][]byte{}
	for _, f := range []string{"q.gob", "best.gob"} {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		old[f] = data
	}
	// whole checks that each network is the first run's, or a complete
	// network of the second run's layer sizes.
	whole := func(what string, hidden int) {
		t.Helper()
		for f, data := range old {
			got, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if bytes.Equal(got, data) {
				continue
			}
			n, err := dqn.ReadNetwork(bytes.NewReader(got))
			if err != nil || n.Dims()[1] != hidden {
				t.Fatalf("%s: %s is neither the old file nor a whole new one: %v", what, f, err)
			}
		}
		if globExists(filepath.Join(out, ".*.gob.tmp-*")) {
			t.Errorf("%s: temporary network files left", what)
		}
	}
	// A network of two 256-unit layers is about 270 kB, far over the 8
	// blocks (4 or 8 kB) of the limit; the run's other files come later or
	// are small.
	args := strings.Join(smallTrain(out, "200", "-checkpoint-every", "0", "-hidden", "256,256"), " ")
	res, err := exec.Command("sh", "-c", "ulimit -f 8; exec "+bin+" "+args).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(res), "file too large") {
		t.Fatalf("run under ulimit -f 8: %v, output %q; want exit 1 with EFBIG", err, res)
	}
	whole("ulimit -f 8", 8)
	for _, f := range []string{"q.gob", "best.gob"} {
		var o, e bytes.Buffer
		if code := run([]string{"eval", filepath.Join(out, f), "-episodes", "2"}, &o, &e); code != 0 {
			t.Fatalf("eval %s after the failed run: exit %d: %s", f, code, e.String())
		}
	}
	// kill -9 as soon as a network's temporary file appears: the write
	// of 2048-unit layers (about 17 MB) takes long enough to be caught in
	// it most times; whether or not it was, the files must be whole.
	cmd := exec.Command(bin, smallTrain(out, "200", "-checkpoint-every", "0", "-hidden", "2048,2048", "-gradient-steps", "0",
		"-eval-every", "0", "-eval-episodes", "1")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	caught, finished := false, false
	for end := time.Now().Add(60 * time.Second); !caught && !finished && time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		if globExists(filepath.Join(out, ".q.gob.tmp-*")) {
			caught = cmd.Process.Signal(syscall.SIGKILL) == nil
		}
		select {
		case <-done:
			finished = true // killed, or finished before it was caught
		default:
		}
	}
	if !finished {
		if !caught {
			cmd.Process.Kill()
		}
		<-done
	}
	t.Logf("killed while writing q.gob: %v", caught)
	// A killed process may leave its temporary file behind (never a
	// partial network under its name).
	tmp, _ := filepath.Glob(filepath.Join(out, ".q.gob.tmp-*"))
	for _, p := range tmp {
		os.Remove(p)
	}
	delete(old, "best.gob") // a completed run without evaluations removes it
	whole("kill -9", 2048)
}
