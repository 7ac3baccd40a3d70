package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trajring/trajring/internal/atomicfile"
)

// TestBenchHuge is `make bench-huge` (issue 44; not CI): RunHuge with
// HUGE_MAX (steps, 1e9 by default), HUGE_TABLE_MAX (items, 1e8), HUGE_DIR
// (the files' directory; a temporary one by default) and HUGE_OPS, writing
// bench/results/<host>-<date>-huge.json, also when a capacity fails.
func TestBenchHuge(t *testing.T) {
	if os.Getenv("TRAJRING_BENCH_HUGE") == "" {
		t.Skip("make bench-huge runs it")
	}
	env := func(name string) int64 {
		v, _ := strconv.ParseFloat(os.Getenv(name), 64)
		return int64(v)
	}
	dir := os.Getenv("HUGE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	opt := HugeOptions{Dir: dir, Max: env("HUGE_MAX"), TableMax: env("HUGE_TABLE_MAX"), Ops: int(env("HUGE_OPS")), ColdOps: int(env("HUGE_COLD_OPS")), Log: os.Stderr}
	rep, err := RunHuge(context.Background(), opt)
	if rep != nil {
		out := os.Getenv("HUGE_OUT")
		if out == "" {
			out = filepath.Join("results", strings.TrimSuffix(rep.FileName(), ".json")+"-huge.json")
		}
		// Whole or not at all, as trajring bench writes its reports.
		if werr := atomicfile.Write(out, rep.WriteJSON); werr != nil {
			t.Fatal(werr)
		}
		t.Logf("wrote %s", out)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestSampleLines checks the lines a sample's windows touch: 40-byte
// records start at offsets 0, 40, 16, 56, 32, 8, 48, 24 of their first
// line, so one record touches 1.5 lines on average and four 3.375.
func TestSampleLines(t *testing.T) {
	for _, c := range []struct {
		b, l   int
		stride int64
		want   float64
	}{{256, 1, 40, 384}, {256, 4, 40, 864}, {1, 1, 64, 1}, {1, 2, 64, 2}, {1, 1, 16, 1}, {4, 1, 48, 6}} {
		if got := sampleLines(c.b, c.l, c.stride); got != c.want {
			t.Errorf("sampleLines(%d, %d, %d) = %v, want %v", c.b, c.l, c.stride, got, c.want)
		}
	}
	if r := lineRuns(256, 4, 40); r.n != 864 || r.span != 64 || r.align != 64 {
		t.Errorf("lineRuns = %+v", r)
	}
}

// TestYardstick runs the yardstick on a small arena: line, window and
// unaligned runs calibrate and time, and the memory it added is counted.
func TestYardstick(t *testing.T) {
	const n = 4 << 20
	y, err := newYardstick(n)
	if err != nil {
		t.Fatal(err)
	}
	defer y.close()
	for _, r := range []yardRuns{lineRuns(256, 1, 40), windowRuns(256, 4, 40), {n: 8, span: 200, align: 1}} {
		d, p50 := y.calibrate(r)
		if d == 0 || p50 <= 0 {
			t.Fatalf("calibrate(%+v) = %d, %v", r, d, p50)
		}
		if ns := y.times(r, d, 5); len(ns) != 5 {
			t.Fatalf("times: %d latencies, want 5", len(ns))
		}
	}
	if rss, huge := anonPages(); rss < n/1024 || huge < 0 {
		t.Errorf("anonPages = %d, %d kB; the arena alone is %d kB", rss, huge, n/1024)
	}
	if f := hugeShare(100, 0, 300, 100); f != 0.5 {
		t.Errorf("hugeShare = %v, want 0.5", f)
	}
}
