package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProgressPlainLines: off a terminal, a line at most every interval
// with count, percentage, rate and ETA, and a last line at finish.
func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, "demo", "env steps", 1000, time.Second)
	start := p.start
	now := start
	p.now = func() time.Time { return now }
	now = start.Add(500 * time.Millisecond)
	p.set(100, "x") // before the interval: nothing
	now = start.Add(2 * time.Second)
	p.set(250, "3 learner batches")
	now = start.Add(2500 * time.Millisecond)
	p.set(300, "") // 0.5 s after the last line: nothing
	now = start.Add(4 * time.Second)
	p.finish("done")
	p.set(2000, "after finish") // ignored
	want := "demo: 250/1000 env steps (25.0%), 2s elapsed, 125 env steps/s, ETA 6s; 3 learner batches\n" +
		"demo: 300/1000 env steps (30.0%), 4s elapsed, 75 env steps/s, ETA 9s; done\n"
	if b.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestProgressSilentAndLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, "bench", "scenarios", 3, 0)
	p.set(1, "x")
	if _, err := io.WriteString(p, "bench: skipped a\nbench: skipped b\n"); err != nil {
		t.Fatal(err)
	}
	p.finish("")
	if want := "bench: skipped a\nbench: skipped b\n"; b.String() != want {
		t.Errorf("silent progress wrote %q, want only the lines %q", b.String(), want)
	}
}

// TestProgressBar draws the terminal bar into a buffer.
func TestProgressBar(t *testing.T) {
	oldTerm, oldThrottle := isTerminal, barThrottle
	isTerminal, barThrottle = func(io.Writer) bool { return true }, 0
	defer func() { isTerminal, barThrottle = oldTerm, oldThrottle }()
	var b bytes.Buffer
	p := newProgress(&b, "train", "env steps", 100, time.Second)
	p.set(40, "eps 0.5")
	p.println("train: greedy evaluation at 40 env steps: 9.5")
	p.set(100, "")
	p.finish("")
	out := b.String()
	for _, want := range []string{"train: eps 0.5", "(40/100,", "train: greedy evaluation at 40 env steps: 9.5\n", "100%", "(100/100,"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output %q lacks %q", out, want)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("bar output %q does not end the line", out)
	}
}

// TestRate: a slow job's rate reads per minute or hour, not "0 .../s" as
// bench's progress line did.
func TestRate(t *testing.T) {
	for _, tc := range []struct {
		perSecond float64
		want      string
	}{
		{125, "125 env steps/s"}, {10, "10 env steps/s"}, {2.54, "2.5 env steps/s"},
		{0.25, "15.0 env steps/min"}, {1.0 / 60, "1.0 env steps/min"}, {1.0 / 120, "30.0 env steps/h"}, {1.0 / 7200, "0.5 env steps/h"},
	} {
		if got := rate(tc.perSecond, "env steps"); got != tc.want {
			t.Errorf("rate(%v) = %q, want %q", tc.perSecond, got, tc.want)
		}
	}
}
