package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// exportCheckpoint saves a 2-row buffer of 4 running steps per row (6
// transitions) and returns its path.
func exportCheckpoint(t *testing.T) string {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 8, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
		{Name: "a", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < 4; s++ {
		err := w.Add(&tensorbuf.Step{
			StepType:     []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			NextStepType: []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			Reward:       []float32{1, 2}, Discount: []float32{1, 1},
			Values: map[string]*tensor.Dense{
				"obs": tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32)),
				"a":   tensor.New(tensor.WithShape(2), tensor.Of(tensor.Int64)),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "buf.ckpt")
	if err := b.SaveFile(path, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExportWritesNPZ(t *testing.T) {
	ckpt := exportCheckpoint(t)
	for _, tc := range []struct{ mode, shape string }{
		{"batch", "(6, 1)"}, {"sequence", "(1, 6)"}, {"none", "(6, 1, 1)"},
	} {
		out := filepath.Join(t.TempDir(), "data.npz")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"export", ckpt, "-o", out, "-mode", tc.mode}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.mode, code, stderr.String())
		}
		if want := out + ": 6 transitions (" + tc.mode + " mode)\n"; stdout.String() != want {
			t.Errorf("stdout %q, want %q", stdout.String(), want)
		}
		z, err := zip.OpenReader(out)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range z.File {
			names = append(names, f.Name)
			if f.Name == "reward.npy" {
				rc, _ := f.Open()
				var hdr [128]byte
				n, _ := rc.Read(hdr[:])
				rc.Close()
				if !strings.Contains(string(hdr[:n]), "'shape': "+tc.shape) {
					t.Errorf("%s: reward header %q, want shape %s", tc.mode, hdr[:n], tc.shape)
				}
			}
		}
		z.Close()
		want := []string{"observation/obs.npy", "next_observation/obs.npy", "action/a.npy", "reward.npy",
			"discount.npy", "is_done.npy", "row.npy", "step.npy"}
		if !slices.Equal(names, want) {
			t.Errorf("%s: entries %v, want %v", tc.mode, names, want)
		}
	}
}

func TestExportRefuses(t *testing.T) {
	ckpt := exportCheckpoint(t)
	dir := t.TempDir()
	notCkpt := filepath.Join(dir, "x.txt")
	if err := os.WriteFile(notCkpt, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"export", ckpt, "-o", filepath.Join(dir, "a.npz"), "-mode", "rows"}, 2, `-mode "rows"`},
		{[]string{"export", ckpt}, 2, "-o"},
		{[]string{"export", "-o", filepath.Join(dir, "a.npz")}, 2, "want one CHECKPOINT"},
		{[]string{"export", notCkpt, "-o", filepath.Join(dir, "b.npz")}, 1, "not a trajring checkpoint"},
		{[]string{"export", ckpt, "-o", filepath.Join(dir, "missing", "c.npz")}, 1, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.npz*")); len(left) != 0 {
		t.Errorf("failed exports left %v", left)
	}
}
