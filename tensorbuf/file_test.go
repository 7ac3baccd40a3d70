package tensorbuf

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// newFileKillBuffer is newKillBuffer on a file-backed buffer in dir.
func newFileKillBuffer(t testing.TB, dir string, capacity int) (*Buffer, *Writer, *Table) {
	t.Helper()
	b, err := New(Config{NumEnvs: 4, Capacity: capacity, Fields: killFields, Seed: 3, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.NewTable(TableConfig{Name: "uniform", Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	return b, w, tb
}

// crashForTest drops a file-backed buffer as a killed process would: its
// files are closed and its lock released without a sync (the pages it
// wrote stay in the page cache, as after kill -9).
func crashForTest(b *Buffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.closedFlag.Store(true)
	b.cleanup.Stop()
	b.freeArenas()
	b.file.close(b.be)
}

// saveBytes is a regular checkpoint of b.
func ckptBytes(t testing.TB, b *Buffer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Save(&buf, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFileBufferReopen: a crash after a sync reopens to exactly the synced
// state (a regular checkpoint of it is byte-identical), whatever was added,
// overwritten, cut and inserted after the sync; Close syncs.
func TestFileBufferReopen(t *testing.T) {
	for _, extra := range []int{0, 3, 17, 40, 200} {
		dir := t.TempDir()
		b, w, tb := newFileKillBuffer(t, dir, 32)
		killAdd(t, b, w, tb, 45) // the rows have wrapped
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		want := ckptBytes(t, b)
		killAdd(t, b, w, tb, extra)
		if extra > 0 {
			if err := w.MarkCut(w.Rows()...); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.Sample(context.Background(), 3); err != nil {
				t.Fatal(err)
			}
		}
		crashForTest(b)
		lb, err := Open(dir)
		if err != nil {
			t.Fatalf("extra %d: %v", extra, err)
		}
		verifyStored(t, lb)
		if got := ckptBytes(t, lb); !bytes.Equal(got, want) {
			t.Fatalf("extra %d: the reopened buffer's checkpoint differs from the synced one's", extra)
		}
		// It goes on, and Close keeps what it added.
		w2, err := lb.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		ltb, err := lb.Table("uniform")
		if err != nil {
			t.Fatal(err)
		}
		killAdd(t, lb, w2, ltb, 9)
		want = ckptBytes(t, lb)
		if err := lb.Close(); err != nil {
			t.Fatal(err)
		}
		lb, err = Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := ckptBytes(t, lb); !bytes.Equal(got, want) {
			t.Fatalf("extra %d: the state after Close differs", extra)
		}
		_ = lb.Close()
	}
}

// TestFileBufferFresh: a crash before any row fills reopens with the
// slots written after the sync unwritten again (their metadata zero).
func TestFileBufferFresh(t *testing.T) {
	dir := t.TempDir()
	b, w, tb := newFileKillBuffer(t, dir, 64)
	killAdd(t, b, w, tb, 5)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	want := ckptBytes(t, b)
	killAdd(t, b, w, tb, 20)
	crashForTest(b)
	lb, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if got := ckptBytes(t, lb); !bytes.Equal(got, want) {
		t.Fatal("the reopened buffer differs from the synced one")
	}
}

// TestFileBufferMatchesMemory: a file-backed buffer samples, exports and
// saves exactly what an in-memory one does.
func TestFileBufferMatchesMemory(t *testing.T) {
	mem, mw, mt := newKillBuffer(t, 1)
	defer mem.Close()
	fb, fw, ft := newFileKillBuffer(t, t.TempDir(), mem.Capacity())
	defer fb.Close()
	for round := range 3 {
		killAdd(t, mem, mw, mt, 100+round*97)
		killAdd(t, fb, fw, ft, 100+round*97)
		if !bytes.Equal(ckptBytes(t, mem), ckptBytes(t, fb)) {
			t.Fatal("checkpoints differ")
		}
		fb.file.prefetch.Store(round%2 == 1) // the cold path's advice changes nothing
		ms, err := mem.SampleSequences(8, 3, SequenceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fs, err := fb.SampleSequences(8, 3, SequenceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms, fs = hostBatch(t, ms), hostBatch(t, fs) // device memory in cuda builds
		for _, name := range []string{"obs", "img", RewardName} {
			a, _ := ms.Field(name)
			c, _ := fs.Field(name)
			if !bytes.Equal(a.Header.Raw, c.Header.Raw) {
				t.Fatalf("round %d: sampled %s differs", round, name)
			}
		}
		fb.file.prefetch.Store(round%2 == 1)
		mb, err := mt.Sample(context.Background(), 8)
		if err != nil {
			t.Fatal(err)
		}
		fbt, err := ft.Sample(context.Background(), 8)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := hostBatch(t, mb).Field("img")
		c, _ := hostBatch(t, fbt).Field("img")
		if !bytes.Equal(a.Header.Raw, c.Header.Raw) {
			t.Fatalf("round %d: table samples differ", round)
		}
		_ = mb.Release()
		_ = fbt.Release()
	}
}

// hostBatch returns a host copy of bt (whose tensors are device memory
// in cuda builds, which the host must not read).
func hostBatch(t *testing.T, bt *Batch) *Batch {
	t.Helper()
	h, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Release() })
	return h
}

// TestFileBufferRefusals: a locked directory, a directory holding a
// buffer, a device backend, a truncated, missing or foreign file.
func TestFileBufferRefusals(t *testing.T) {
	dir := t.TempDir()
	b, w, tb := newFileKillBuffer(t, dir, 16)
	killAdd(t, b, w, tb, 20)
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open: %v, want ErrLocked", err)
	}
	if _, err := New(Config{NumEnvs: 1, Capacity: 4, Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("New on an open directory: %v, want ErrLocked", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{NumEnvs: 1, Capacity: 4, Dir: dir}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New on a directory holding a buffer: %v, want ErrConfig", err)
	}
	if _, err := New(Config{NumEnvs: 1, Capacity: 4, Dir: t.TempDir(), Backend: plainBackend{cpu.New()}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with another backend: %v, want ErrConfig", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of an empty directory: %v, want ErrCorrupt", err)
	}
	// A file of another buffer of the same shape.
	other := t.TempDir()
	ob, ow, otb := newFileKillBuffer(t, other, 16)
	killAdd(t, ob, ow, otb, 3)
	_ = ob.Close()
	copyFile(t, filepath.Join(other, fileRingName(0)), filepath.Join(dir, fileRingName(0)))
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a foreign ring file: %v, want ErrCorrupt", err)
	}
	// Truncated files, a damaged state.
	for _, name := range []string{fileRingName(1), fileMetaName, fileStateName} {
		d := t.TempDir()
		b, w, tb := newFileKillBuffer(t, d, 16)
		killAdd(t, b, w, tb, 20)
		_ = b.Close()
		p := filepath.Join(d, name)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, st.Size()-100); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(d); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with %s truncated: %v, want ErrCorrupt", name, err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(d); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with %s missing: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestFileBufferInfo: the state file reads as a checkpoint summary, and a
// regular checkpoint saved from a file-backed buffer loads in memory.
func TestFileBufferInfo(t *testing.T) {
	dir := t.TempDir()
	b, w, tb := newFileKillBuffer(t, dir, 16)
	killAdd(t, b, w, tb, 20)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	info, gen, err := ReadFileBufferInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gen < 2 || info.Cursors[0] != b.Cursor(0) || len(info.Tables) != 1 {
		t.Fatalf("info %+v generation %d", info, gen)
	}
	path := filepath.Join(t.TempDir(), "c.ckpt")
	if err := b.SaveFile(path, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	lb, err := LoadFile(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verifyStored(t, lb)
	_ = lb.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.FileInfo(); !ok {
		t.Fatal("FileInfo of a file-backed buffer")
	}
	if err := b.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if st, _, ok := b.StepTypeAt(0, 0); ok || st != 0 {
		t.Fatal("StepTypeAt after Close")
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFileBufferEvict: after a sync, Evict gives the rings' pages back
// (Residency falls) and the data reads back from the files unchanged.
func TestFileBufferEvict(t *testing.T) {
	b, w, tb := newFileKillBuffer(t, t.TempDir(), 4096)
	defer b.Close()
	killAdd(t, b, w, tb, 3000)
	res, total, err := b.Residency()
	if err != nil || res <= 0 || res > total {
		t.Fatalf("residency %d of %d: %v", res, total, err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := b.Evict(); err != nil {
		t.Fatal(err)
	}
	after, _, err := b.Residency()
	if err != nil || after >= res {
		t.Fatalf("residency %d after Evict, %d before: %v", after, res, err)
	}
	verifyStored(t, b)
	if fileBackedForTests != nil {
		return // every buffer is file-backed
	}
	mem, _, _ := newKillBuffer(t, 1)
	defer mem.Close()
	if err := mem.Evict(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Evict of an in-memory buffer: %v", err)
	}
}

// TestFileBufferCloseWhileSampling: Close while samplers and a writer run
// on a file-backed buffer: they stop with ErrClosed, nothing faults, and
// the directory reopens with what Close synced.
func TestFileBufferCloseWhileSampling(t *testing.T) {
	dir := t.TempDir()
	b, w, tb := newFileKillBuffer(t, dir, 64)
	killAdd(t, b, w, tb, 100)
	done := make(chan error, 3)
	for i := range 3 {
		go func() {
			for {
				var err error
				switch i {
				case 0:
					var bt *Batch
					if bt, err = tb.Sample(context.Background(), 8); err == nil {
						_ = bt.Release()
					}
				case 1:
					var bt *Batch
					if bt, err = b.SampleSequences(8, 4, SequenceOptions{}); err == nil {
						_ = bt.Release()
					}
				default:
					rows := w.Rows()
					pos := make([]int64, len(rows))
					for k, r := range rows {
						pos[k] = b.Cursor(r)
					}
					err = w.Add(killStep(rows, pos))
				}
				if err != nil {
					done <- err
					return
				}
			}
		}()
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v, want ErrClosed", err)
		}
	}
	lb, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	verifyStored(t, lb)
}
