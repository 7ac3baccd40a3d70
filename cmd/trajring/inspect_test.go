package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// writeCheckpoint saves a small real checkpoint: 2 rows x 16 steps of a
// 3-float observation and an int64 action, 5 steps written per row, and a
// prioritized table "replay" of 4 items.
func writeCheckpoint(t *testing.T, path string) {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Seed: 3, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		st, next := tensorbuf.Mid, tensorbuf.Mid
		if i == 0 {
			st = tensorbuf.First
		}
		if err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{st, st}, NextStepType: []tensorbuf.StepType{next, next},
			Reward: []float32{1, 1}, Discount: []float32{1, 1},
			Values: map[string]*tensor.Dense{
				"obs":    tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6))),
				"action": tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{int64(i), 0})),
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Prioritized, PriorityExponent: 0.6, MaxSize: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := tb.Insert(tensorbuf.Item{Row: i % 2, Start: int64(i / 2), Len: 2, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SaveFile(path, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInspectPrintsCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.ckpt")
	writeCheckpoint(t, path)
	for _, args := range [][]string{{"inspect", path}, {"inspect", "-verify", path}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errb.String())
		}
		got := out.String()
		for _, want := range []string{
			"trajring checkpoint, format version ", // tensorbuf's to choose
			"buffer: 2 rows x 16 steps",
			"10 steps stored (31.2%)",
			"obs", "action", "row cursors: min 5, max 5",
			"replay", "prioritized",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%q: output lacks %q:\n%s", args, want, got)
			}
		}
		tableLine := ""
		for _, l := range strings.Split(got, "\n") {
			if strings.HasPrefix(l, "replay ") {
				tableLine = l
			}
		}
		// table  selector  items  inserts  samples  max size ...
		if f := strings.Fields(tableLine); len(f) < 6 || f[2] != "4" || f[3] != "4" || f[4] != "0" || f[5] != "100" {
			t.Errorf("%q: table line %q, want 4 items, 4 inserts, 0 samples, max size 100", args, tableLine)
		}
		if v := strings.Contains(got, "verified:"); v != (len(args) == 3) {
			t.Errorf("%q: verified line present %v", args, v)
		}
	}
}

// TestInspectErrors: a missing, foreign, truncated or corrupt file gives
// one line on stderr naming the file and exit 1; a wrong number of
// arguments is a usage error (exit 2).
func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ckpt")
	writeCheckpoint(t, good)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(data)
	flipped[40] ^= 0x10 // inside the header section's first chunk
	arena := bytes.Clone(data)
	arena[len(arena)-60] ^= 0x01 // inside the last arena chunk: only -verify reads it
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect", filepath.Join(dir, "missing.ckpt")}, 1, "no such file"},
		{[]string{"inspect", write("foreign", []byte("hello, not a checkpoint at all"))}, 1, "not a trajring checkpoint"},
		{[]string{"inspect", write("empty", nil)}, 1, "not a trajring checkpoint"},
		{[]string{"inspect", write("truncated", data[:60])}, 1, "corrupt"},
		{[]string{"inspect", "-verify", write("truncated-arena", data[:len(data)-30])}, 1, "corrupt"},
		{[]string{"inspect", write("flipped", flipped)}, 1, "corrupt"},
		{[]string{"inspect", "-verify", write("arena", arena)}, 1, "corrupt"},
		{[]string{"inspect", dir}, 1, "holds no file-backed buffer"},
		{[]string{"inspect"}, 2, "want one checkpoint FILE or buffer DIR, got 0 arguments"},
		{[]string{"inspect", good, good}, 2, "want one checkpoint FILE or buffer DIR, got 2 arguments"},
		{[]string{"inspect", "-bogus", good}, 2, "unknown flag: -bogus"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		msg := errb.String()
		if code != tc.code || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, one line containing %q", tc.args, code, out.String(), msg, tc.code, tc.want)
		}
	}
	// Without -verify the corrupted arena goes unnoticed (documented).
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", filepath.Join(dir, "arena")}, &out, &errb); code != 0 {
		t.Errorf("inspect without -verify of a file with a bad arena chunk: exit %d, %s", code, errb.String())
	}
}

// writeBigCheckpoint saves a checkpoint of about 2 MiB, most of it arena
// (2 rows of 64 steps of a 4096-float observation), plain or compressed.
func writeBigCheckpoint(t *testing.T, path string, compress bool) {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 64, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{4096}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]float32, 2*4096)
	for i := range 64 {
		for j := range obs {
			obs[j] = float32(i*len(obs)+j) * 0.37 // compresses a little, not to nothing
		}
		st := tensorbuf.Mid
		if i == 0 {
			st = tensorbuf.First
		}
		if err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{st, st}, NextStepType: []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			Reward: []float32{1, 1}, Discount: []float32{1, 1},
			Values: map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(2, 4096), tensor.WithBacking(obs))},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SaveFile(path, tensorbuf.SaveOptions{Compress: compress}); err != nil {
		t.Fatal(err)
	}
}

// TestInspectTruncated: without -verify, a checkpoint cut anywhere after
// its tables (1 MiB of a 2 MiB file, in an arena, one byte short, the end
// section missing) fails with one line saying it is truncated and exit 1,
// as inspect -h says; before, only the header, rows and tables were read
// and a file cut in its arenas printed a normal summary with exit 0.
// Bytes after the end are noted, not refused (Load ignores them).
func TestInspectTruncated(t *testing.T) {
	dir := t.TempDir()
	for _, compress := range []bool{false, true} {
		good := filepath.Join(dir, "good.ckpt")
		writeBigCheckpoint(t, good, compress)
		data, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) <= 1<<20 {
			t.Fatalf("compress %v: checkpoint of %d bytes, want more than 1 MiB", compress, len(data))
		}
		var out, errb bytes.Buffer
		if code := run([]string{"inspect", good}, &out, &errb); code != 0 {
			t.Fatalf("compress %v: inspect of a whole checkpoint: exit %d, %s", compress, code, errb.String())
		}
		for _, n := range []int{1 << 20, len(data) / 2, len(data) - 1, len(data) - 24 - 16} {
			p := filepath.Join(dir, "cut.ckpt")
			if err := os.WriteFile(p, data[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			errb.Reset()
			code := run([]string{"inspect", p}, &out, &errb)
			msg := errb.String()
			if code != 1 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "corrupt") || !strings.Contains(msg, "truncated") {
				t.Errorf("compress %v: cut to %d of %d bytes: exit %d, stdout %q, stderr %q; want exit 1, one line saying truncated",
					compress, n, len(data), code, out.String(), msg)
			}
		}
		p := filepath.Join(dir, "trailing.ckpt")
		if err := os.WriteFile(p, append(bytes.Clone(data), "junk"...), 0o644); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{"inspect", p}, &out, &errb); code != 0 || !strings.Contains(out.String(), "note: 4 bytes after the checkpoint's end") {
			t.Errorf("compress %v: checkpoint and 4 more bytes: exit %d, stderr %q, stdout:\n%s", compress, code, errb.String(), out.String())
		}
	}
}
