package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trajring/trajring/remote"
)

// signalDeadline bounds every wait of the signal tests: generous, for
// -race on two loaded cores; the waits poll and end as soon as their
// condition holds.
const signalDeadline = 30 * time.Second

// proc is a trajring process started by a signal test.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out, err lineWatch
	done     chan struct{}
	code     int // exit status once done; -1 if a signal killed it
}

// startProc starts the built binary with args; the test's end kills it if
// it still runs.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: args[0], done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -2
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// until polls cond on the process's stdout and stderr until it holds,
// failing the test if the process exits first or the deadline passes.
func (p *proc) until(t *testing.T, what string, cond func(stdout, stderr string) bool) {
	t.Helper()
	deadline := time.Now().Add(signalDeadline)
	for !cond(p.out.String(), p.err.String()) {
		select {
		case <-p.done:
			if cond(p.out.String(), p.err.String()) {
				return
			}
			t.Fatalf("%s exited (status %d) before %s\nstdout:\n%s\nstderr:\n%s", p.name, p.code, what, p.out.String(), p.err.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %v\nstdout:\n%s\nstderr:\n%s", p.name, what, signalDeadline, p.out.String(), p.err.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and returns the exit status, failing the test unless the
// process exits within within.
func (p *proc) stop(t *testing.T, sig syscall.Signal, within time.Duration) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still runs %v after %v\nstdout:\n%s\nstderr:\n%s", p.name, within, sig, p.out.String(), p.err.String())
	}
	t.Logf("%s: %v: exit %d after %v", p.name, sig, p.code, time.Since(start).Round(time.Millisecond))
	return p.code
}

// wait returns the exit status of a process that ends by itself.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(signalDeadline):
		t.Fatalf("%s still runs after %v\nstdout:\n%s\nstderr:\n%s", p.name, signalDeadline, p.out.String(), p.err.String())
	}
	return p.code
}

// buildTrajring builds the command into dir and returns its path.
func buildTrajring(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "trajring")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveStats is serve's newest statistics line.
type serveStats struct{ actors, waiting, steps int64 }

var serveStatsLine = regexp.MustCompile(`actors (\d+) \(waiting (\d+)\)  steps (\d+) `)

// lastServeStats returns the numbers of the newest statistics line in out.
func lastServeStats(out string) (serveStats, bool) {
	m := serveStatsLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return serveStats{}, false
	}
	last := m[len(m)-1]
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	return serveStats{n(last[1]), n(last[2]), n(last[3])}, true
}

var servingURL = regexp.MustCompile(`serving on (nats://127\.0\.0\.1:\d+) `)

// startServe starts serve on a free loopback port with data and extra
// flags and returns it with its URL once it serves.
func startServe(t *testing.T, bin, data string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"serve", "-port", "-1", "-data", data, "-stats-every", "100ms"}, extra...)
	s := startProc(t, bin, args...)
	var url string
	s.until(t, "its serving line", func(out, _ string) bool {
		m := servingURL.FindStringSubmatch(out)
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	return s, url
}

// checkpointActors returns the actors of the ingester state in the
// checkpoint of data.
func checkpointActors(t *testing.T, data string) []remote.ActorState {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "checkpoint", remote.CheckpointManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		State remote.State `json:"state"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m.State.Actors
}

// noTemporaries fails the test if dir holds a temporary file of an atomic
// write ("." + name + ".tmp-*").
func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("%s holds a temporary file %s", dir, e.Name())
		}
	}
}

// TestSignals sends real SIGINT and SIGTERM to the built binary: actor,
// serve, demo and bench each stop within a few seconds with status 130
// (143 for SIGTERM), leave what they document, and a later run works.
// It builds the binary (a few seconds) and is skipped with -short.
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := buildTrajring(t, t.TempDir())
	t.Run("actor", func(t *testing.T) { t.Parallel(); testActorSignals(t, bin) })
	t.Run("serve", func(t *testing.T) { t.Parallel(); testServeSignals(t, bin) })
	t.Run("demo", func(t *testing.T) { t.Parallel(); testDemoSignals(t, bin) })
	t.Run("bench", func(t *testing.T) { t.Parallel(); testBenchSignals(t, bin) })
	t.Run("serve-full-disk", func(t *testing.T) { t.Parallel(); testServeFullDisk(t, bin) })
}

// testServeFullDisk: serve's final checkpoint written into a full disk
// (ulimit -f: the write fails with EFBIG) fails with status 1 naming the
// cause, and leaves the previous checkpoint whole, byte for byte; so does
// a serve killed with SIGKILL; a later serve resumes from it.
func testServeFullDisk(t *testing.T, bin string) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh for ulimit")
	}
	data := t.TempDir()
	s, url := startServe(t, bin, data, "-rows", "2", "-capacity", "500", "-checkpoint-every", "1h")
	a := startProc(t, bin, "actor", "-connect", url, "-envs", "2", "-runs", "1", "-steps", "1000")
	if code := a.wait(t); code != 0 {
		t.Fatalf("actor: exit %d, stderr %q", code, a.err.String())
	}
	s.until(t, "the actor's steps", func(out, _ string) bool { st, ok := lastServeStats(out); return ok && st.steps >= 1000 })
	if code := s.stop(t, syscall.SIGINT, 15*time.Second); code != 130 {
		t.Fatalf("serve on SIGINT: exit %d, stderr %q", code, s.err.String())
	}
	ckdir := filepath.Join(data, "checkpoint")
	saved := dirContents(t, ckdir)
	const limit = 8 << 10 // ulimit -f 16: 16 blocks of 512 bytes
	if fi, err := os.Stat(filepath.Join(ckdir, "buffer-000001.ckpt")); err != nil || fi.Size() <= limit {
		t.Fatalf("checkpoint %v, %v: want one over %d bytes", fi, err, limit)
	}
	// sh's ulimit -f counts 512-byte blocks.
	full := startProc(t, "sh", "-c", `ulimit -f 16 && exec "$0" "$@"`, bin, "serve", "-port", "-1", "-data", data, "-stats-every", "0", "-checkpoint-every", "1h")
	full.name = "serve (ulimit -f 16)"
	full.until(t, "its serving line", func(out, _ string) bool { return strings.Contains(out, "serving on ") })
	if code := full.stop(t, syscall.SIGINT, 15*time.Second); code != 1 || !strings.Contains(full.err.String(), "final checkpoint:") ||
		!strings.Contains(full.err.String(), "file too large") {
		t.Fatalf("serve into a full disk on SIGINT: exit %d, stderr %q; want 1 naming the failed checkpoint", code, full.err.String())
	}
	if now := dirContents(t, ckdir); now != saved {
		t.Fatalf("a failed final checkpoint changed %s:\n%s\nwas:\n%s", ckdir, now, saved)
	}
	k, _ := startServe(t, bin, data, "-checkpoint-every", "1h")
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := k.wait(t); code != -1 {
		t.Fatalf("serve on SIGKILL: exit %d", code)
	}
	if now := dirContents(t, ckdir); now != saved {
		t.Fatalf("a killed serve changed %s:\n%s\nwas:\n%s", ckdir, now, saved)
	}
	s, _ = startServe(t, bin, data, "-checkpoint-every", "1h")
	if !strings.Contains(s.err.String(), "resumed from "+ckdir) {
		t.Errorf("serve after the failures: stderr %q, want it resumed", s.err.String())
	}
	if code := s.stop(t, syscall.SIGINT, 15*time.Second); code != 130 {
		t.Fatalf("serve on SIGINT: exit %d, stderr %q", code, s.err.String())
	}
}

// dirContents lists dir's files with a hash of each.
func dirContents(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %x\n", e.Name(), len(raw), sha256.Sum256(raw))
	}
	return b.String()
}

// testActorSignals: an actor run until interrupted (-runs 0) that gets
// Ctrl-C after publishing exits with 130 having flushed and said goodbye:
// serve frees its rows (actors 0), a later actor that needs them is
// ingested, and serve's final checkpoint holds no actor. Before, the
// actor exited 1 with "context canceled" and no bye, and serve kept its
// rows for good (the later actor was never ingested). SIGTERM during a
// finite run ends it the same way, with 143.
func testActorSignals(t *testing.T, bin string) {
	data := t.TempDir()
	// -actor-idle 0: only a bye frees the rows, as before -actor-idle.
	s, url := startServe(t, bin, data, "-rows", "4", "-capacity", "1000", "-checkpoint-every", "1h", "-actor-idle", "0")
	busy := func(want int64) func(string, string) bool {
		return func(out, _ string) bool {
			st, ok := lastServeStats(out)
			return ok && st.actors == 1 && st.steps > want
		}
	}
	a := startProc(t, bin, "actor", "-connect", url, "-envs", "4", "-runs", "0", "-steps", "1000", "-k", "8")
	s.until(t, "the actor's steps", busy(0))
	if code := a.stop(t, syscall.SIGINT, 15*time.Second); code != 130 || !strings.Contains(a.err.String(), "interrupted (SIGINT)") {
		t.Fatalf("actor -runs 0 on SIGINT: exit %d, stderr %q; want 130 and one line saying it was interrupted", code, a.err.String())
	}
	if n := strings.Count(a.err.String(), "\n"); n != 1 {
		t.Errorf("actor on SIGINT printed %d lines on stderr, want 1: %q", n, a.err.String())
	}
	var left serveStats
	s.until(t, "the interrupted actor's rows freed", func(out, _ string) bool {
		st, ok := lastServeStats(out)
		left = st
		return ok && st.actors == 0 && st.waiting == 0
	})

	// A later actor needing all the rows is ingested, and one stopped by
	// SIGTERM in a finite run leaves too.
	b := startProc(t, bin, "actor", "-connect", url, "-envs", "4", "-runs", "2", "-steps", "200", "-seed", "2")
	if code := b.wait(t); code != 0 {
		t.Fatalf("second actor: exit %d, stderr %q", code, b.err.String())
	}
	s.until(t, "the second actor's steps", func(out, _ string) bool {
		st, ok := lastServeStats(out)
		return ok && st.actors == 0 && st.steps >= left.steps+2*200
	})
	st, _ := lastServeStats(s.out.String())
	c := startProc(t, bin, "actor", "-connect", url, "-envs", "4", "-runs", "1000", "-steps", "1000", "-seed", "3")
	s.until(t, "the third actor's steps", busy(st.steps))
	if code := c.stop(t, syscall.SIGTERM, 15*time.Second); code != 143 || !strings.Contains(c.err.String(), "interrupted (SIGTERM)") {
		t.Fatalf("actor on SIGTERM: exit %d, stderr %q; want 143", code, c.err.String())
	}
	s.until(t, "the third actor's rows freed", func(out, _ string) bool {
		st, ok := lastServeStats(out)
		return ok && st.actors == 0 && st.waiting == 0
	})
	if code := s.stop(t, syscall.SIGINT, 15*time.Second); code != 130 {
		t.Fatalf("serve on SIGINT: exit %d, stderr %q", code, s.err.String())
	}
	if as := checkpointActors(t, data); len(as) != 0 {
		t.Errorf("serve's final checkpoint holds actors %+v after every actor left", as)
	}
}

// testServeSignals: serve stopped by SIGINT saves its final checkpoint
// (-checkpoint-every) and exits 130 saying so; a restart on the same -data
// resumes from it, ingests an actor, and stops on SIGTERM with 143 and a
// newer checkpoint. A signal while the checkpoint is being resumed, before
// the server listens, also exits 130.
func testServeSignals(t *testing.T, bin string) {
	data := t.TempDir()
	s, _ := startServe(t, bin, data, "-rows", "2", "-capacity", "500", "-checkpoint-every", "1h")
	if code := s.stop(t, syscall.SIGINT, 15*time.Second); code != 130 || !strings.Contains(s.err.String(), "final checkpoint in") {
		t.Fatalf("serve on SIGINT: exit %d, stderr %q; want 130 naming the final checkpoint", code, s.err.String())
	}
	ckdir := filepath.Join(data, "checkpoint")
	if _, err := os.Stat(filepath.Join(ckdir, remote.CheckpointManifest)); err != nil {
		t.Fatalf("no final checkpoint: %v", err)
	}
	noTemporaries(t, ckdir)

	s, url := startServe(t, bin, data, "-checkpoint-every", "1h")
	if !strings.Contains(s.err.String(), "resumed from "+ckdir+": its buffer of -rows 2 x -capacity 500") {
		t.Errorf("resumed serve said %q, want the checkpoint's shape", s.err.String())
	}
	a := startProc(t, bin, "actor", "-connect", url, "-envs", "2", "-runs", "1", "-steps", "100")
	if code := a.wait(t); code != 0 {
		t.Fatalf("actor: exit %d, stderr %q", code, a.err.String())
	}
	s.until(t, "the actor's steps", func(out, _ string) bool { st, ok := lastServeStats(out); return ok && st.steps >= 100 })
	if code := s.stop(t, syscall.SIGTERM, 15*time.Second); code != 143 || !strings.Contains(s.err.String(), "interrupted (SIGTERM): final checkpoint") {
		t.Fatalf("resumed serve on SIGTERM: exit %d, stderr %q; want 143", code, s.err.String())
	}
	noTemporaries(t, ckdir)
	ckpts, _ := filepath.Glob(filepath.Join(ckdir, "buffer-*.ckpt"))
	if len(ckpts) != 1 || filepath.Base(ckpts[0]) != "buffer-000002.ckpt" {
		t.Errorf("checkpoint files %v, want the second generation alone", ckpts)
	}
	// The steps are in the checkpoint: inspect reads it.
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", ckpts[0]}, &out, &errb); code != 0 {
		t.Fatalf("inspect the final checkpoint: exit %d, %s", code, errb.String())
	}
}

// testDemoSignals: demo stopped by SIGINT during its collection prints the
// summary of what it collected, keeps its -metrics records, and exits 130;
// a later short run works and replaces the file.
func testDemoSignals(t *testing.T, bin string) {
	dir := t.TempDir()
	metrics := filepath.Join(dir, "m.jsonl")
	var lines []string
	// SIGINT at the first progress line; SIGTERM a few lines later, with
	// CSV records.
	for _, tc := range []struct {
		sig           syscall.Signal
		name, format  string
		progressLines int
	}{{syscall.SIGINT, "SIGINT", "jsonl", 1}, {syscall.SIGTERM, "SIGTERM", "csv", 4}} {
		d := startProc(t, bin, "demo", "-envs", "8", "-steps", "1000000000", "-capacity", "256", "-batch", "16",
			"-progress", "50ms", "-metrics", metrics, "-metrics-every", "1000", "-metrics-format", tc.format)
		d.until(t, "progress lines", func(_, errs string) bool { return strings.Count(errs, "env steps") >= tc.progressLines })
		if code := d.stop(t, tc.sig, 15*time.Second); code != 128+int(tc.sig) ||
			!strings.Contains(d.err.String(), "trajring demo: interrupted ("+tc.name+"): stopped after") {
			t.Fatalf("demo on %s: exit %d, stderr %q", tc.name, code, d.err.String())
		}
		if !strings.Contains(d.out.String(), "env steps/s") {
			t.Errorf("demo on %s printed no summary: %q", tc.name, d.out.String())
		}
		raw, err := os.ReadFile(metrics)
		if err != nil {
			t.Fatal(err)
		}
		lines = strings.Split(strings.TrimSpace(string(raw)), "\n")
		for i, l := range lines {
			if tc.format == "jsonl" && !json.Valid([]byte(l)) || tc.format == "csv" && strings.Count(l, ",") != strings.Count(lines[0], ",") {
				t.Fatalf("%s metrics line %d %q is not whole", tc.format, i, l)
			}
		}
		noTemporaries(t, dir)
	}

	d := startProc(t, bin, "demo", "-envs", "8", "-steps", "2000", "-capacity", "256", "-batch", "16", "-progress", "0",
		"-metrics", metrics, "-metrics-every", "1000")
	if code := d.wait(t); code != 0 {
		t.Fatalf("a later demo: exit %d, stderr %q", code, d.err.String())
	}
	raw, _ := os.ReadFile(metrics)
	if n := strings.Count(string(raw), "\n"); n < 1 || n > 3 {
		t.Errorf("the later demo's metrics file has %d records, want its own 2 (not appended to the interrupted run's %d):\n%s", n, len(lines), raw)
	}
}

// testBenchSignals: bench stopped by SIGINT exits 130 having written
// nothing: the report and plots of an earlier run in -out stay as they
// were, with no temporary file beside them.
func testBenchSignals(t *testing.T, bin string) {
	out := t.TempDir()
	args := []string{"bench", "-quick", "-python", "none", "-no-go-peer", "-run", "sample lowdim L=1 B=16 ", "-out", out, "-progress", "0"}
	b := startProc(t, bin, args...)
	if code := b.wait(t); code != 0 {
		t.Fatalf("bench: exit %d, stderr %q", code, b.err.String())
	}
	before := dirState(t, out)
	if len(before) == 0 {
		t.Fatal("bench wrote nothing")
	}
	// SIGINT as soon as it runs; SIGTERM once it measures.
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		at   string
	}{{syscall.SIGINT, "SIGINT", "bench: "}, {syscall.SIGTERM, "SIGTERM", "0/1 scenarios"}} {
		b = startProc(t, bin, append(args[:len(args)-1:len(args)-1], "50ms")...)
		b.until(t, fmt.Sprintf("%q on stderr", tc.at), func(_, errs string) bool { return strings.Contains(errs, tc.at) })
		code := b.stop(t, tc.sig, 15*time.Second)
		if code == 0 { // the run finished before the signal (a fast machine)
			t.Logf("bench finished before the %s", tc.name)
			return
		}
		if code != 128+int(tc.sig) || !strings.Contains(b.err.String(), "trajring bench: interrupted ("+tc.name+"): nothing written") {
			t.Fatalf("bench on %s: exit %d, stderr %q", tc.name, code, b.err.String())
		}
		if after := dirState(t, out); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("a bench interrupted by %s changed -out: %v, was %v", tc.name, after, before)
		}
	}
}

// dirState lists dir's files with their sizes and modification times.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, fmt.Sprintf("%s %d %v", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	return s
}
