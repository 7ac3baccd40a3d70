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
