package tensorbuf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// TestCheckpointLoadsVersion2 loads checkpoints committed in
// testdata/, written by format version 2 (whole arenas) from the buffers
// newCkptBuffer builds with the same arguments: each must restore that
// buffer exactly and behave as it does.
func TestCheckpointLoadsVersion2(t *testing.T) {
	for _, tc := range []struct {
		file                  string
		envs, capacity, steps int
	}{
		{"v2-partial.ckpt", 3, 16, 10},     // rows 62-69% full, never-written slots saved as zeros
		{"v2-wrapped-zstd.ckpt", 3, 8, 13}, // every row wrapped, compressed chunks
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			info, err := ReadCheckpointInfo(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if info.Version != 2 {
				t.Errorf("info version %d, want 2", info.Version)
			}
			orig := newCkptBuffer(t, nil, tc.envs, tc.capacity, tc.steps)
			loaded, err := Load(bytes.NewReader(data), LoadOptions{Backend: cpu.New()})
			if err != nil {
				t.Fatal(err)
			}
			defer loaded.Close()
			if got, want := stateString(t, loaded), stateString(t, orig); got != want {
				t.Fatalf("restored state differs: %s", firstDiff(want, got))
			}
			if got, want := behaviour(t, loaded), behaviour(t, orig); got != want {
				t.Fatalf("restored buffer behaves differently: %s", firstDiff(want, got))
			}
		})
	}
}
