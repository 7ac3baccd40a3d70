package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/remote"
)

// serveCheckpoint runs serve in-process on data with args until it
// serves, then ends its context, and returns its stderr; with
// -checkpoint-every it leaves a final checkpoint.
func serveCheckpoint(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{})
	out := &lineWatch{want: "serving on ", seen: seen}
	var errb lineWatch
	cmd := newServeCmd()
	cmd.SetArgs(longFlags(cmd, append([]string{"-port", "-1", "-stats-every", "0"}, args...)))
	cmd.SetOut(out)
	cmd.SetErr(&errb)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case <-seen:
		cancel()
	case err := <-done:
		t.Fatalf("serve %q returned before serving: %v; stderr %q", args, err, errb.String())
	case <-time.After(signalDeadline):
		t.Fatalf("serve %q does not serve within %v; stderr %q", args, signalDeadline, errb.String())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve %q: %v", args, err)
		}
	case <-time.After(signalDeadline):
		t.Fatalf("serve %q still runs %v after its context ended", args, signalDeadline)
	}
	return errb.String()
}

// TestServeResumeShape: serve resumed from a checkpoint refuses -rows or
// -capacity given explicitly with other values than the checkpoint's
// (status 2, one line naming both), as train -resume refuses changes to
// its learner; without them it takes the checkpoint's and says so. Before,
// it ran silently with the checkpoint's buffer.
func TestServeResumeShape(t *testing.T) {
	data := t.TempDir()
	serveCheckpoint(t, "-data", data, "-rows", "3", "-capacity", "200", "-checkpoint-every", "1h")
	ckdir := filepath.Join(data, "checkpoint")
	if _, err := os.Stat(filepath.Join(ckdir, remote.CheckpointManifest)); err != nil {
		t.Fatalf("no final checkpoint: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rows", "4"}, "-rows 4: the checkpoint in " + ckdir + " holds a buffer of -rows 3 x -capacity 200"},
		{[]string{"-capacity", "100"}, "-capacity 100: the checkpoint in " + ckdir + " holds a buffer of -rows 3 x -capacity 200"},
		{[]string{"-rows", "3", "-capacity", "64"}, "-capacity 64: the checkpoint"},
	} {
		done := make(chan int, 1)
		var out, errb bytes.Buffer
		go func() {
			done <- run(append([]string{"serve", "-port", "-1", "-data", data, "-stats-every", "0"}, tc.args...), &out, &errb)
		}()
		select {
		case code := <-done:
			msg := errb.String()
			if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("serve %q on a checkpoint of 3 x 200: exit %d, stderr %q; want 2 and one line containing %q", tc.args, code, msg, tc.want)
			}
		case <-time.After(signalDeadline):
			t.Fatalf("serve %q on a checkpoint of 3 x 200 still runs after %v: want it refused", tc.args, signalDeadline)
		}
	}
	// The same values, or none, resume, saying which shape they resume.
	for _, args := range [][]string{{"-rows", "3", "-capacity", "200"}, nil} {
		got := serveCheckpoint(t, append([]string{"-data", data}, args...)...)
		if want := "resumed from " + ckdir + ": its buffer of -rows 3 x -capacity 200\n"; got != want {
			t.Errorf("serve %q: stderr %q, want %q", args, got, want)
		}
	}
}
