package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportAtomic: an export whose write fails (a file size limit,
// `ulimit -f`: EFBIG, as a full disk fails it) exits 1 and leaves the
// .npz it would replace as it was, with no temporary file behind.
func TestExportAtomic(t *testing.T) {
	bin := buildTrainBinary(t)
	ck := exportCheckpoint(t)
	out := filepath.Join(t.TempDir(), "out.npz")
	if err := os.WriteFile(out, []byte("the previous export"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Command("sh", "-c", `ulimit -f 1; exec "$0" "$@"`, bin, "export", ck, "-o", out).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(res), "file too large") {
		t.Fatalf("export under ulimit -f 1: %v, output %q; want exit 1 with EFBIG", err, res)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, []byte("the previous export")) {
		t.Fatalf("after the failed export %s holds %q (%v), want the previous file", out, got, err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".out.npz.tmp-*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
	// Without the limit the export replaces the file whole.
	if res, err := exec.Command(bin, "export", ck, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("export: %v: %s", err, res)
	}
	if got, _ := os.ReadFile(out); !bytes.HasPrefix(got, []byte("PK")) {
		t.Fatalf("the export is not a zip archive: %q", got[:min(len(got), 8)])
	}
}
