package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestServeRefusesOpenListenerWithoutCredentials: listening beyond
// loopback without credentials is a usage error (exit 2, one line), and
// the server never starts (no data directory is made).
func TestServeRefusesOpenListenerWithoutCredentials(t *testing.T) {
	dir := t.TempDir() + "/data"
	for _, listen := range []string{"0.0.0.0", "::", "192.0.2.1"} {
		var out, errb bytes.Buffer
		code := run([]string{"serve", "-listen", listen, "-port", "-1", "-data", dir}, &out, &errb)
		if msg := errb.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "credentials") {
			t.Errorf("serve -listen %s: exit %d, stderr %q; want exit 2 and one line about credentials", listen, code, msg)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused serve touched its data directory: %v", err)
	}
}

// TestServeFlagErrors: a bad port, a negative interval or a -data that
// cannot be made is a usage error naming the flag (exit 2, one line),
// given before the server starts; before, -stats-every 0 or -1s panicked
// in time.NewTicker, -checkpoint-every -1s was taken as "never", and a
// bad port or -data stalled 30 s and exited 1 without a cause.
func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-stats-every", "-1s"}, "-stats-every must not be negative (0: no statistics), got -1s"},
		{[]string{"-checkpoint-every", "-1s"}, "-checkpoint-every must not be negative (0: never), got -1s"},
		{[]string{"-port", "70000"}, "-port must be 1-65535, or -1 for any free port; got 70000"},
		{[]string{"-port", "-5"}, "-port must be 1-65535, or -1 for any free port; got -5"},
		{[]string{"-port", "0"}, "-port must be 1-65535, or -1 for any free port; got 0"},
		{[]string{"-rows", "0"}, "-rows must be positive, got 0"},
		{[]string{"-capacity", "-1"}, "-capacity must be positive, got -1"},
		{[]string{"-data", ""}, "-data must name a directory"},
		{[]string{"-data", filepath.Join(file, "data")}, "-data: mkdir " + file + ": not a directory"},
	} {
		args := append([]string{"serve", "-port", "-1", "-data", data}, tc.args...)
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if msg := errb.String(); code != 2 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, one line containing %q", tc.args, code, out.String(), msg, tc.want)
		}
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused serve made its data directory: %v", err)
	}
}

// TestServePortInUse: a server that cannot listen fails at once with the
// server's own reason (exit 1, one line), not after the 30 s readiness
// timeout with none.
func TestServePortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	var out, errb bytes.Buffer
	code := run([]string{"serve", "-port", port, "-data", t.TempDir()}, &out, &errb)
	msg := errb.String()
	if code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "127.0.0.1:"+port) || !strings.Contains(msg, "address already in use") {
		t.Errorf("serve on a port in use: exit %d, stderr %q; want exit 1 and one line naming the port and the cause", code, msg)
	}
}

// lineWatch is a writer safe for concurrent use that closes seen once the
// text written contains want.
type lineWatch struct {
	mu   sync.Mutex
	b    strings.Builder
	want string
	seen chan struct{}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.seen != nil && strings.Contains(w.b.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestServeStatsEveryZero: -stats-every 0 serves without statistics
// (before, it panicked in time.NewTicker) and stops cleanly when its
// context ends.
func TestServeStatsEveryZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{})
	out := &lineWatch{want: "serving on ", seen: seen}
	var errb lineWatch
	cmd := newServeCmd()
	cmd.SetContext(ctx)
	cmd.SetOut(out)
	cmd.SetErr(&errb)
	c := serveConfig{host: "127.0.0.1", port: -1, data: t.TempDir(), rows: 2, capacity: 16}
	done := make(chan error, 1)
	go func() { done <- serve(cmd, c) }()
	select {
	case <-seen:
		cancel()
	case err := <-done:
		t.Fatalf("serve returned before serving: %v; stderr %q", err, errb.String())
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v", err)
	}
	if got := out.String(); strings.Count(got, "\n") != 1 {
		t.Errorf("serve -stats-every 0 printed more than its serving line:\n%s", got)
	}
}

// TestServeCompressesByDefault: serve's checkpoints are zstd-compressed
// unless -compress=false (a stored CartPole step compresses to a fraction).
func TestServeCompressesByDefault(t *testing.T) {
	f := newServeCmd().Flags().Lookup("compress")
	if f == nil || f.DefValue != "true" {
		t.Fatalf("-compress flag %+v, want a boolean defaulting to true", f)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "-compress=maybe"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-compress") {
		t.Errorf("-compress=maybe: exit %d, %q; want 2 naming the flag", code, errb.String())
	}
}
