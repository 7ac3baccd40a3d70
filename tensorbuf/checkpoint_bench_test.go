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
// ratios, and the pause writers saw.
func BenchmarkCheckpoint(b *testing.B) {
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
	defer buf.Close()
	// Fill the arenas with incompressible-ish bytes.
	for i := range buf.cols {
		a := buf.cols[i].arena
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
	total := buf.StepBytes() * int64(steps)
	ckpt, plain := filepath.Join(dir, "bench.ckpt"), filepath.Join(dir, "bench.plain")
	defer os.Remove(ckpt)
	defer os.Remove(plain)
	gbs := func(d time.Duration) float64 { return float64(total) / d.Seconds() / 1e9 }
	var save, write, load, read, pause time.Duration
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
