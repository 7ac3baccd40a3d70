package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportRefusesItsInput: -o naming the checkpoint itself, by the same
// path, another path or a hard link, or naming a directory, exits 2 with
// one line saying so and changes nothing (before: the checkpoint was
// replaced by the .npz, exit 0; a directory gave "rename ./.DIR.tmp-N
// DIR: file exists").
func TestExportRefusesItsInput(t *testing.T) {
	ckpt := exportCheckpoint(t)
	data, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(ckpt)
	link := filepath.Join(t.TempDir(), "link.ckpt")
	if err := os.Link(ckpt, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "out.npz")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ out, want string }{
		{ckpt, "is the checkpoint"},
		{filepath.Join(dir, ".", filepath.Base(ckpt)), "is the checkpoint"},
		{link, "is the checkpoint"},
		{sub, "is a directory"},
		{dir, "is a directory"},
	} {
		var o, e bytes.Buffer
		code := run([]string{"export", ckpt, "-o", tc.out}, &o, &e)
		if msg := e.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("-o %s: exit %d, stderr %q; want exit 2, one line with %q", tc.out, code, msg, tc.want)
		}
		if got, err := os.ReadFile(ckpt); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("-o %s changed the checkpoint (%v)", tc.out, err)
		}
		if st, err := os.Stat(sub); err != nil || !st.IsDir() {
			t.Fatalf("-o %s: the directory %s is gone (%v)", tc.out, sub, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) != 0 {
		t.Errorf("refused exports left %v", left)
	}
}

// TestExportModes: a new .npz gets os.Create's mode (0644 under the usual
// umask), and one that replaces a file keeps that file's mode (before:
// 0600 in both cases).
func TestExportModes(t *testing.T) {
	ckpt := exportCheckpoint(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	f, err := os.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(ref)
	want := st.Mode().Perm()
	out := filepath.Join(dir, "data.npz")
	var o, e bytes.Buffer
	if code := run([]string{"export", ckpt, "-o", out}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != want {
		t.Errorf("a new .npz has mode %v, want %v (os.Create's)", st.Mode().Perm(), want)
	}
	for _, mode := range []os.FileMode{0o644, 0o664, 0o600} {
		if err := os.Chmod(out, mode); err != nil {
			t.Fatal(err)
		}
		if code := run([]string{"export", ckpt, "-o", out}, &o, &e); code != 0 {
			t.Fatalf("exit %d: %s", code, e.String())
		}
		if st, _ := os.Stat(out); st.Mode().Perm() != mode {
			t.Errorf("a replaced .npz has mode %v, want the old file's %v", st.Mode().Perm(), mode)
		}
	}
}
