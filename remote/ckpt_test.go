package remote

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestCheckpointLayout checks what LoadCheckpoint reads: a directory of
// the earlier layout (ingester.json holding the State, next to
// buffer.ckpt) loads, and a checkpoint into it switches it to the
// generation layout; manifests that are not whole are refused with
// ErrConfig and change nothing.
func TestCheckpointLayout(t *testing.T) {
	k := newKillIngester(t, 64)
	for range 3 {
		k.ingest(t)
	}
	legacy := func(t *testing.T) string {
		dir := t.TempDir()
		if err := k.in.cfg.Buffer.SaveFile(filepath.Join(dir, legacyBufferFile), tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(k.in.State())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, CheckpointManifest), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	current := func(t *testing.T) string {
		dir := t.TempDir()
		if err := k.in.Checkpoint(dir, tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// rewrite replaces a field of dir's manifest.
	rewrite := func(key string, v any) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, CheckpointManifest)
			data, _ := os.ReadFile(path)
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			m[key] = v
			data, _ = json.Marshal(m)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		dir     func(t *testing.T) string
		spoil   func(t *testing.T, dir string)
		wantErr error
		files   []string // after a checkpoint into the directory
	}{
		{"earlier layout", legacy, nil, nil, []string{"buffer-000001.ckpt", CheckpointManifest}},
		{"generation layout", current, nil, nil, []string{"buffer-000002.ckpt", CheckpointManifest}},
		{"unknown format", current, rewrite("format", "trajring-ingester-checkpoint/9"), ErrConfig, nil},
		{"foreign buffer file", current, rewrite("buffer", "../buffer-000001.ckpt"), ErrConfig, nil},
		{"no state", current, rewrite("state", nil), ErrConfig, nil},
		{"buffer size differs", current, rewrite("buffer_bytes", 12), ErrConfig, nil},
		{"not JSON", current, func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, CheckpointManifest), []byte("{"), 0o644)
		}, ErrConfig, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			if tc.spoil != nil {
				tc.spoil(t, dir)
			}
			before := checkpointFiles(t, dir)
			buf, st, err := LoadCheckpoint(dir, tensorbuf.LoadOptions{})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || buf != nil || st != nil {
					t.Fatalf("LoadCheckpoint: %v, %v, %v; want an error wrapping %v", buf, st, err, tc.wantErr)
				}
				if got := checkpointFiles(t, dir); !slices.Equal(got, before) {
					t.Fatalf("files %v after a refused load, were %v", got, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			if len(st.Actors) != 1 || st.Actors[0].NextFrame != 3 || !slices.Equal(st.Actors[0].Next, []int64{12, 12}) ||
				st.StreamFloor != 3 || buf.Cursor(0) != 12 || buf.Cursor(1) != 12 {
				t.Fatalf("state %+v with cursors %d %d, want 3 frames of 12 steps a row", st, buf.Cursor(0), buf.Cursor(1))
			}
			if err := k.in.Checkpoint(dir, tensorbuf.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := checkpointFiles(t, dir); !slices.Equal(got, tc.files) {
				t.Fatalf("files %v after a checkpoint, want %v", got, tc.files)
			}
		})
	}
}
