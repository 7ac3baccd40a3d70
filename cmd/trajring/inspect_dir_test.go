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

// TestInspectFileBuffer: inspect DIR prints a file-backed buffer's summary
// as of its last sync, also while the buffer is open; -verify opens it,
// and fails (one line) while another holds it or when a file is truncated.
func TestInspectFileBuffer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "replay")
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Dir: dir, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid}, NextStepType: []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			Reward: []float32{1, 1}, Discount: []float32{1, 1},
			Values: map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "file-backed buffer, sync generation 2") || !strings.Contains(out.String(), "cursors") {
		t.Fatalf("inspect DIR: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"inspect", "-verify", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "in use") {
		t.Fatalf("inspect -verify of an open buffer: exit %d, %q", code, errb.String())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"inspect", "-verify", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "verified") {
		t.Fatalf("inspect -verify DIR: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if err := os.Truncate(filepath.Join(dir, "ring-0"), 4096); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"inspect", "-verify", dir}, &out, &errb); code != 1 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "corrupt") {
		t.Fatalf("inspect -verify with a truncated ring: exit %d, %q", code, errb.String())
	}
}
