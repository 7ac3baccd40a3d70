package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trajring/trajring/agents/dqn"
)

// smallTrain are the flags of a train run of a second or less.
func smallTrain(out string, steps string, extra ...string) []string {
	return append([]string{"train", "-steps", steps, "-hidden", "8", "-batch", "8", "-buffer", "2000", "-learning-starts", "100",
		"-train-freq", "100", "-gradient-steps", "2", "-eval-every", "200", "-eval-episodes", "2", "-progress", "0", "-out", out}, extra...)
}

// TestTrainResumeNamesDamagedReplay: -resume from a checkpoint whose
// replay file is damaged fails with one line naming that file (before:
// the corruption without the file's name), exit 1; so does a damaged
// state file.
func TestTrainResumeNamesDamagedReplay(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	var o, e bytes.Buffer
	if code := run(smallTrain(out, "400", "-checkpoint-every", "200"), &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	ck, err := dqn.ReadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ck.ReplayPath, ck.StatePath} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		damaged := bytes.Clone(data)
		damaged[len(damaged)/2] ^= 0x40
		if err := os.WriteFile(path, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		o.Reset()
		e.Reset()
		code := run([]string{"train", "-resume", "-out", out, "-steps", "600", "-progress", "0"}, &o, &e)
		if msg := e.String(); code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, path) {
			t.Errorf("resume with %s damaged: exit %d, stderr %q; want exit 1, one line naming the file", filepath.Base(path), code, msg)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
