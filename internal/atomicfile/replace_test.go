package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestReplaceModes: a new file gets perm less the umask, as os.Create's
// 0666 does; a replaced file keeps its mode; a directory is refused and
// left alone.
func TestReplaceModes(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	f, err := os.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(ref)
	created := st.Mode().Perm()
	p := filepath.Join(dir, "new")
	if err := Replace(p, 0o666, func(w io.Writer) error { _, err := io.WriteString(w, "a"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != created {
		t.Errorf("new file mode %v, want %v (os.Create's)", st.Mode().Perm(), created)
	}
	for _, mode := range []os.FileMode{0o600, 0o640, 0o664} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := Replace(p, 0o666, func(w io.Writer) error { _, err := io.WriteString(w, "b"); return err }); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != mode {
			t.Errorf("replaced file mode %v, want the old %v", st.Mode().Perm(), mode)
		}
	}
	if err := Replace(dir, 0o666, func(io.Writer) error { return nil }); err == nil {
		t.Fatal("replacing a directory succeeded")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("the directory after a refused Replace: %v", err)
	}
}

// TestCreateCommitClose: until Commit the old contents stay; Close
// abandons the new ones and removes the temporary file; a failed write
// leaves the old file.
func TestCreateCommitClose(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "new")
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("before Commit: %q", b)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("after Close: %q", b)
	}
	f, err = Create(p, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("after Commit: %q", b)
	}
	boom := errors.New("boom")
	if err := Replace(p, 0o666, func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("after a failed write: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".f.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
