package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// The Go benchmarks share one pixels buffer of 256 rows x 4096 steps
// (1,048,576 steps of 3,092 bytes: 3.2 GB) and one ceiling of the same
// size, built on first use and freed after the run.
const (
	benchEnvs     = 256
	benchCapacity = 4096
	benchB        = 256
)

var benchFixture struct {
	once sync.Once
	buf  *tensorbuf.Buffer
	ceil Ceiling
	err  error
}

func pixelsFixture(b *testing.B) (*tensorbuf.Buffer, Ceiling) {
	benchFixture.once.Do(func() {
		l := Pixels()
		benchFixture.buf, benchFixture.err = Filled(l, benchEnvs, benchCapacity, nil)
		if benchFixture.err != nil {
			return
		}
		benchFixture.ceil, benchFixture.err = NewCeiling(benchFixture.buf.Backend(), CeilingConfig{
			Layout: l, NumEnvs: benchEnvs, Capacity: benchCapacity,
			OutSteps: 4 * benchB, PlainBytes: 2 * 4 * benchB * l.StepBytes(),
		})
	})
	if benchFixture.err != nil {
		b.Fatal(benchFixture.err)
	}
	return benchFixture.buf, benchFixture.ceil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchFixture.ceil != nil {
		benchFixture.ceil.Close()
	}
	if lowDimFixture.buf != nil {
		lowDimFixture.buf.Close()
	}
	if benchFixture.buf != nil {
		benchFixture.buf.Close()
	}
	os.Exit(code)
}

// syncBackend waits for the backend's queued work, so that a device
// backend's asynchronous operations are timed whole (a no-op on the cpu).
func syncBackend(b *testing.B, buf *tensorbuf.Buffer) {
	if err := buf.Backend().Sync(); err != nil {
		b.Fatal(err)
	}
}

// skipNoGather skips a gather/scatter ceiling on a device backend, whose
// ceiling is the plain device-to-device copy only.
func skipNoGather(b *testing.B, c Ceiling) {
	if !c.Gathers() {
		b.Skip("no gather ceiling on a device backend: plain-copy (device to device) is the ceiling there")
	}
}

// reportGBps reports the effective bandwidth of moving bytes per op.
func reportGBps(b *testing.B, bytes int64) {
	b.ReportMetric(float64(bytes)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GB/s")
}

// BenchmarkSample samples sequences of B=256 from the 1M-step pixels
// buffer (ours), next to a plain copy of the same bytes and a copy()
// gather of the same random rows from arenas of the same page kind.
// GB/s is 2·B·L·S/t with S the step bytes plus the mask byte.
func BenchmarkSample(b *testing.B) {
	for _, l := range []int{1, 4} {
		name := fmt.Sprintf("pixels/B=%d/L=%d", benchB, l)
		s := Pixels().StepBytes() + 1
		moved := 2 * int64(benchB*l) * s
		b.Run(name+"/ours", func(b *testing.B) {
			buf, _ := pixelsFixture(b)
			var bt tensorbuf.Batch
			defer bt.Release()
			if err := buf.SampleSequencesInto(&bt, benchB, l, tensorbuf.SequenceOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := buf.SampleSequencesInto(&bt, benchB, l, tensorbuf.SequenceOptions{}); err != nil {
					b.Fatal(err)
				}
				syncBackend(b, buf)
			}
			reportGBps(b, moved)
		})
		b.Run(name+"/plain-copy", func(b *testing.B) {
			_, ceil := pixelsFixture(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := ceil.Plain(moved / 2); err != nil {
					b.Fatal(err)
				}
			}
			reportGBps(b, moved)
		})
		b.Run(name+"/gather-copy", func(b *testing.B) {
			buf, ceil := pixelsFixture(b)
			skipNoGather(b, ceil)
			d, err := SequenceDraws(buf, drawCount(benchB*l, benchEnvs*benchCapacity), benchB, l, tensorbuf.SequenceOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if err := ceil.Windows(d.Windows[i%len(d.Windows)], int64(l)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportGBps(b, moved)
		})
	}
}

// BenchmarkSampleTransitions samples B=256 transitions (obs, next obs,
// action, reward, discount, is_done) from the pixels buffer.
func BenchmarkSampleTransitions(b *testing.B) {
	l := Pixels()
	moved := 2 * int64(benchB) * transitionBytes(l)
	b.Run("pixels/B=256/ours", func(b *testing.B) {
		buf, _ := pixelsFixture(b)
		var tr tensorbuf.Transitions
		defer tr.Release()
		if err := buf.SampleTransitionsInto(&tr, benchB); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := buf.SampleTransitionsInto(&tr, benchB); err != nil {
				b.Fatal(err)
			}
			syncBackend(b, buf)
		}
		reportGBps(b, moved)
	})
	b.Run("pixels/B=256/gather-copy", func(b *testing.B) {
		buf, ceil := pixelsFixture(b)
		skipNoGather(b, ceil)
		d, err := TransitionDraws(buf, drawCount(benchB, benchEnvs*benchCapacity), benchB)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			k := i % len(d.Idx)
			if err := ceil.Transitions(d.Idx[k], d.Next[k]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportGBps(b, moved)
	})
}

// BenchmarkTableSample samples B=256 one-step items through a uniform
// table (Reverb's path) from the pixels buffer.
func BenchmarkTableSample(b *testing.B) {
	moved := 2 * int64(benchB) * (Pixels().StepBytes() + 1)
	b.Run("pixels/uniform/B=256/L=1/ours", func(b *testing.B) {
		buf, _ := pixelsFixture(b)
		t, err := buf.Table("bench-uniform")
		if err != nil {
			if t, err = buf.NewTable(tensorbuf.TableConfig{Name: "bench-uniform", Selector: tensorbuf.Uniform, Seed: 3}); err != nil {
				b.Fatal(err)
			}
			// One item per stored step of the first 64 rows (262,144 items).
			for r := range 64 {
				for s := int64(0); s < benchCapacity; s++ {
					if _, err := t.Insert(tensorbuf.Item{Row: r, Start: buf.Oldest(r) + s, Len: 1, Priority: 1}); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		var bt tensorbuf.Batch
		defer bt.Release()
		ctx := context.Background()
		if err := t.SampleInto(ctx, &bt, benchB); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := t.SampleInto(ctx, &bt, benchB); err != nil {
				b.Fatal(err)
			}
			syncBackend(b, buf)
		}
		reportGBps(b, moved)
	})
}

// BenchmarkAdd adds batched steps of 256 rows to the pixels buffer (its
// rows wrap, overwriting the oldest steps), next to a scatter of the same
// bytes to the same ring slots and a plain copy of them.
func BenchmarkAdd(b *testing.B) {
	l := Pixels()
	moved := 2 * int64(benchEnvs) * l.StepBytes()
	b.Run("pixels/W=256/ours", func(b *testing.B) {
		buf, _ := pixelsFixture(b)
		w, err := buf.NewWriter()
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		st := newStepper(l, w.Rows())
		t := buf.Cursor(0)
		if err := w.Add(st.at(t)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			t++
			if err := w.Add(st.at(t)); err != nil {
				b.Fatal(err)
			}
			syncBackend(b, buf)
		}
		reportGBps(b, moved)
	})
	b.Run("pixels/W=256/plain-copy", func(b *testing.B) {
		_, ceil := pixelsFixture(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := ceil.Plain(moved / 2); err != nil {
				b.Fatal(err)
			}
		}
		reportGBps(b, moved)
	})
	b.Run("pixels/W=256/scatter-copy", func(b *testing.B) {
		_, ceil := pixelsFixture(b)
		skipNoGather(b, ceil)
		idx := make([]int64, benchEnvs)
		b.ReportAllocs()
		t := int64(0)
		for b.Loop() {
			for r := range idx {
				idx[r] = int64(r)*benchCapacity + t%benchCapacity
			}
			t++
			if err := ceil.Scatter(idx); err != nil {
				b.Fatal(err)
			}
		}
		reportGBps(b, moved)
	})
}

var lowDimFixture struct {
	once sync.Once
	buf  *tensorbuf.Buffer
	err  error
}

// BenchmarkSampleLowDim samples L=1 rows of 108-byte steps from a
// 1,000,000-step buffer at a small and a large batch: the large one runs
// over the cpu backend's goroutines.
func BenchmarkSampleLowDim(b *testing.B) {
	for _, n := range []int{256, 65536} {
		b.Run(fmt.Sprintf("B=%d/L=1/ours", n), func(b *testing.B) {
			lowDimFixture.once.Do(func() { lowDimFixture.buf, lowDimFixture.err = Filled(LowDim(), 16, 62500, nil) })
			if lowDimFixture.err != nil {
				b.Fatal(lowDimFixture.err)
			}
			buf := lowDimFixture.buf
			var bt tensorbuf.Batch
			defer bt.Release()
			if err := buf.SampleSequencesInto(&bt, n, 1, tensorbuf.SequenceOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := buf.SampleSequencesInto(&bt, n, 1, tensorbuf.SequenceOptions{}); err != nil {
					b.Fatal(err)
				}
				syncBackend(b, buf)
			}
			reportGBps(b, 2*int64(n)*(LowDim().StepBytes()+1))
		})
	}
}

// BenchmarkGatherWorkers runs the gather ceiling of B=65536 low-dim rows
// (7 MB, above the cpu backend's 4 MiB split threshold) on one goroutine
// and split over GOMAXPROCS goroutines as the cpu backend does, to show
// what the split gains or costs on the machine at hand.
func BenchmarkGatherWorkers(b *testing.B) {
	const n = 65536
	l := LowDim()
	c, err := newHostCeiling(CeilingConfig{Layout: l, NumEnvs: 16, Capacity: 62500, OutSteps: n})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	draws := make([][]tensorbuf.Window, 8)
	for k := range draws {
		draws[k] = make([]tensorbuf.Window, n)
		for i := range draws[k] {
			draws[k][i] = tensorbuf.Window{Row: int64(rng.IntN(16)), Start: int64(rng.IntN(62500)), Len: 1}
		}
	}
	workers := c.workers
	for _, w := range []int{1, workers} {
		b.Run(fmt.Sprintf("B=%d/workers=%d", n, w), func(b *testing.B) {
			c.workers = w
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := c.Windows(draws[i%len(draws)], 1); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportGBps(b, 2*n*(l.StepBytes()+1))
		})
	}
}
