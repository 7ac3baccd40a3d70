package tensorbuf

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCheckpoint saves and loads a buffer of 3 KB steps
// (TRAJRING_CKPT_BENCH_STEPS steps, 262,144 by default; 1,048,576 is the
// issue's 3 GB figure) through SaveFile and LoadFile, and in the same run
// writes (with fsync) and reads the same number of bytes as a plain
// sequential file in the same directory (TRAJRING_CKPT_BENCH_DIR, the
// test's temporary directory by default). It reports GB/s of each and the
// ratios, and the pause writers saw (SnapshotCopy, SnapshotCopyOnWrite).
func BenchmarkCheckpoint(b *testing.B) {
	buf, steps, dir := benchBuffer(b)
	defer buf.Close()
	total := buf.StepBytes() * int64(steps)
	ckpt, plain := filepath.Join(dir, "bench.ckpt"), filepath.Join(dir, "bench.plain")
	defer os.Remove(ckpt)
	defer os.Remove(plain)
	gbs := func(d time.Duration) float64 { return float64(total) / d.Seconds() / 1e9 }
	var save, write, load, read, pause, cowPause time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := plainWrite(plain, total); err != nil {
			b.Fatal(err)
		}
		write += time.Since(t0)
		var rep SaveReport
		t0 = time.Now()
		if err := buf.SaveFile(ckpt, SaveOptions{Snapshot: SnapshotLock, Report: &rep}); err != nil {
			b.Fatal(err)
		}
		save += time.Since(t0)
		var crep SaveReport
		if err := buf.SaveFile(ckpt, SaveOptions{Snapshot: SnapshotCopy, Report: &crep}); err != nil {
			b.Fatal(err)
		}
		pause += crep.Pause
		var wrep SaveReport
		if err := buf.SaveFile(ckpt, SaveOptions{Snapshot: SnapshotCopyOnWrite, Report: &wrep}); err != nil {
			b.Fatal(err)
		}
		cowPause += wrep.Pause
		t0 = time.Now()
		if err := plainRead(plain); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		t0 = time.Now()
		lb, err := LoadFile(ckpt, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		load += time.Since(t0)
		_ = lb.Close()
	}
	n := time.Duration(b.N)
	b.ReportMetric(gbs(save/n), "save-GB/s")
	b.ReportMetric(gbs(write/n), "write-GB/s")
	b.ReportMetric(gbs(load/n), "load-GB/s")
	b.ReportMetric(gbs(read/n), "read-GB/s")
	b.ReportMetric(float64(write)/float64(save), "save/write")
	b.ReportMetric(float64(read)/float64(load), "load/read")
	b.ReportMetric(float64(pause/n)/1e6, "copy-pause-ms")
	b.ReportMetric(float64(cowPause/n)/1e6, "cow-pause-ms")
}

// benchBuffer returns a buffer of 3 KB steps filled with
// incompressible-ish bytes (TRAJRING_CKPT_BENCH_STEPS steps, 262,144 by
// default), its number of steps and the directory to write files to.
func benchBuffer(b *testing.B) (*Buffer, int, string) {
	steps := 1 << 18
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_CKPT_BENCH_STEPS")); err == nil && v > 0 {
		steps = v
	}
	dir := os.Getenv("TRAJRING_CKPT_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	const envs = 16
	buf, err := New(Config{NumEnvs: envs, Capacity: steps / envs, Seed: 1, Fields: []Field{
		{Name: "obs", Role: Observation, DType: Uint8, Shape: []int{32, 32, 3}},
		{Name: "act", Role: Action, DType: Int64},
	}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range buf.arenas {
		a := buf.arenas[i].arena
		chunk := make([]byte, 1<<20)
		for off := int64(0); off < a.Size(); off += int64(len(chunk)) {
			for j := range chunk {
				chunk[j] = byte(uint64(off+int64(j)) * 0x9E3779B97F4A7C15 >> 56)
			}
			n := min(int64(len(chunk)), a.Size()-off)
			if err := buf.be.Upload(a, off, chunk[:n]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for r := range buf.cursor {
		buf.cursor[r] = int64(steps / envs)
	}
	return buf, steps, dir
}

// BenchmarkCheckpointLoad measures LoadFile alone against a plain
// sequential read of a file of the same size, alternating the two in the
// same run (both files in the page cache), and reports the ratio
// (load/read). A load must also populate the new buffer's memory, which
// the plain read (into one reused 4 MiB buffer) does not: read-new is the
// same plain read into a freshly allocated host arena of the file's size
// (what any loader pays at least), and load/read-new the ratio to it.
func BenchmarkCheckpointLoad(b *testing.B) {
	buf, steps, dir := benchBuffer(b)
	defer buf.Close()
	total := buf.StepBytes() * int64(steps)
	ckpt, plain := filepath.Join(dir, "bench.ckpt"), filepath.Join(dir, "bench.plain")
	defer os.Remove(ckpt)
	defer os.Remove(plain)
	if err := plainWrite(plain, total); err != nil {
		b.Fatal(err)
	}
	if err := buf.SaveFile(ckpt, SaveOptions{Snapshot: SnapshotLock}); err != nil {
		b.Fatal(err)
	}
	var load, read, readNew time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := plainRead(plain); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		t0 = time.Now()
		if err := plainReadNew(buf.be, plain, total); err != nil {
			b.Fatal(err)
		}
		readNew += time.Since(t0)
		t0 = time.Now()
		lb, err := LoadFile(ckpt, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		load += time.Since(t0)
		_ = lb.Close()
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(total)/(load/n).Seconds()/1e9, "load-GB/s")
	b.ReportMetric(float64(total)/(read/n).Seconds()/1e9, "read-GB/s")
	b.ReportMetric(float64(total)/(readNew/n).Seconds()/1e9, "read-new-GB/s")
	b.ReportMetric(float64(read)/float64(load), "load/read")
	b.ReportMetric(float64(readNew)/float64(load), "load/read-new")
}

// plainReadNew reads the file at path (of n bytes) into a new arena of
// be, in 4 MiB reads, and frees the arena.
func plainReadNew(be Backend, path string, n int64) error {
	a, err := be.Alloc(n)
	if err != nil {
		return err
	}
	defer be.Free(a)
	h, ok := a.(hostArena)
	if !ok {
		return plainRead(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dst := h.Bytes()
	for off := 0; off < len(dst); off += ckptChunk {
		if _, err := io.ReadFull(f, dst[off:min(off+ckptChunk, len(dst))]); err != nil {
			return err
		}
	}
	return nil
}

// plainWrite writes n bytes to path in 4 MiB writes and syncs, as a
// checkpoint is written.
func plainWrite(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	chunk := make([]byte, ckptChunk)
	for i := range chunk {
		chunk[i] = byte(i * 31)
	}
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := f.Write(chunk[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func plainRead(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, ckptChunk)
	for {
		_, err := io.ReadFull(f, chunk)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
