package tensorbuf

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileBufferFullDisk fills a small tmpfs (mounted by the test, so it
// runs as root only, and is skipped elsewhere): a buffer that does not fit
// is refused before any file is written; with the disk full, adds and
// syncs fail with ErrStorage and ENOSPC, changing nothing, samplers go on,
// and once space returns the buffer adds, syncs and reopens as usual.
func TestFileBufferFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a small tmpfs needs root: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	dir := filepath.Join(mnt, "buf")
	if _, err := New(Config{NumEnvs: 4, Capacity: 1024, Fields: killFields, Dir: dir}); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a buffer larger than the disk: %v, want ErrStorage and ENOSPC", err)
	}
	if names, _ := os.ReadDir(dir); len(names) > 1 { // the lock file only
		t.Fatalf("a refused buffer left %d files", len(names))
	}
	b, w, tb := newFileKillBuffer(t, dir, 64)
	killAdd(t, b, w, tb, 100)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	// Fill the disk.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	for {
		if _, err := filler.Write(page); err != nil {
			break
		}
	}
	_ = filler.Close()
	var addErr error
	rows := w.Rows()
	for range 1000 {
		before := b.Cursor(0)
		pos := make([]int64, len(rows))
		for i, r := range rows {
			pos[i] = b.Cursor(r)
		}
		if addErr = w.Add(killStep(rows, pos)); addErr != nil {
			if b.Cursor(0) != before {
				t.Fatal("a failed add moved the cursor")
			}
			break
		}
	}
	if !errors.Is(addErr, ErrStorage) || !errors.Is(addErr, syscall.ENOSPC) {
		t.Fatalf("adding on a full disk: %v, want ErrStorage and ENOSPC", addErr)
	}
	if err := b.Sync(); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Sync on a full disk: %v, want ErrStorage and ENOSPC", err)
	}
	if _, err := b.SampleSequences(4, 2, SequenceOptions{}); err != nil {
		t.Fatalf("sampling on a full disk: %v", err)
	}
	verifyStored(t, b)
	// Space returns.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	killAdd(t, b, w, tb, 30)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	want := ckptBytes(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lb, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	verifyStored(t, lb)
	if got := ckptBytes(t, lb); string(got) != string(want) {
		t.Fatal("reopened state differs from the synced one")
	}
}
