package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// addOurs returns one add of W rows to a filled pixels buffer of
// capacity steps, each call the next step, its fields by position
// (Step.Fields); the buffer is closed when b ends.
func addOurs(b *testing.B, w, capacity int) func() { return addOursStep(b, w, capacity, false) }

// addOursByName is addOurs with the step's fields by name (Step.Values).
func addOursByName(b *testing.B, w, capacity int) func() { return addOursStep(b, w, capacity, true) }

func addOursStep(b *testing.B, w, capacity int, byName bool) func() {
	l := Pixels()
	buf, err := Filled(l, w, capacity, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Close() })
	wr, err := buf.NewWriter()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = wr.Close() })
	st := newStepper(l, wr.Rows())
	if byName {
		st.step.Values = make(map[string]*tensor.Dense, len(l.Fields))
		for i, f := range l.Fields {
			st.step.Values[f.Name] = st.step.Fields[i]
		}
		st.step.Fields = nil
	}
	t := buf.Cursor(0)
	return func() {
		if err := wr.Add(st.at(t)); err != nil {
			b.Fatal(err)
		}
		t++
	}
}

// addPeer is addOurs for the slice-of-structs peer.
func addPeer(b *testing.B, w, capacity int) func() {
	p := newGoPeer(Pixels(), w, capacity)
	b.Cleanup(p.release)
	cur := 0
	return func() {
		p.addRows(w, cur)
		cur++
	}
}

// BenchmarkAddSmall adds batched steps of W rows to a pixels buffer of
// smallCap steps, with the fields by position and by name, next to the
// slice-of-structs peer's add of the same rows: the per-call cost of the
// add rows (a small SMALLCAP, such as 128, keeps the ring in the cache
// and leaves the per-call work).
func BenchmarkAddSmall(b *testing.B) {
	for _, w := range []int{1, 16, 128} {
		capacity := max(1, smallCap/w)
		for _, c := range []struct {
			name string
			mk   func(*testing.B, int, int) func()
		}{{"ours", addOurs}, {"ours-by-name", addOursByName}, {"go-structs", addPeer}} {
			b.Run(fmt.Sprintf("W=%d/%s", w, c.name), func(b *testing.B) {
				add := c.mk(b, w, capacity)
				b.ReportAllocs()
				for b.Loop() {
					add()
				}
			})
		}
	}
}

// BenchmarkAddSmallPaired times BenchmarkAddSmall's two adds in
// alternating rounds of $PAIRK calls (default 256) in one process, and
// reports the median over rounds of peer time over ours (above 1: ours is
// faster), in wall time and in the thread's CPU time, which the load of
// other processes on a shared machine disturbs less than wall time:
//
//	go test -run '^$' -bench AddSmallPaired -benchtime 200x ./bench
//
// Each iteration is one round of both.
func BenchmarkAddSmallPaired(b *testing.B) {
	k := envInt("PAIRK", 256)
	for _, w := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("W=%d", w), func(b *testing.B) {
			capacity := max(1, smallCap/w)
			ours, peer := addOurs(b, w, capacity), addPeer(b, w, capacity)
			times := func(f func()) func() {
				return func() {
					for range k {
						f()
					}
				}
			}
			pairedRounds(b, k, times(ours), times(peer))
		})
	}
}

// BenchmarkSampleLowDimL4Paired is BenchmarkAddSmallPaired for
// BenchmarkSampleLowDimL4's two samples, in rounds of $PAIRK/16 calls.
func BenchmarkSampleLowDimL4Paired(b *testing.B) {
	const n, seq = 256, 4
	k := max(1, envInt("PAIRK", 256)/16)
	buf, err := Filled(LowDim(), 16, 62500, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	var bt tensorbuf.Batch
	defer bt.Release()
	p := newGoPeer(LowDim(), 16, 62500)
	defer p.release()
	ours := func() {
		for range k {
			if err := buf.SampleSequencesInto(&bt, n, seq, tensorbuf.SequenceOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	peer := func() {
		for range k {
			p.sampleIntN(n, seq)
		}
	}
	pairedRounds(b, k, ours, peer)
}

// pairedRounds runs ours and peer (k calls each) once per iteration, in
// alternating order, on one locked thread, and reports the medians of
// their per-call times and of peer over ours per round.
func pairedRounds(b *testing.B, k int, ours, peer func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ours()
	peer()
	var wo, wp, co, cp, rw, rc []float64
	timed := func(f func()) (wall, cpu float64) {
		w0, c0 := time.Now(), threadCPU()
		f()
		return float64(time.Since(w0).Nanoseconds()) / float64(k), float64((threadCPU() - c0).Nanoseconds()) / float64(k)
	}
	i := 0
	for b.Loop() {
		var ow, oc, pw, pc float64
		if i%2 == 0 {
			ow, oc = timed(ours)
			pw, pc = timed(peer)
		} else {
			pw, pc = timed(peer)
			ow, oc = timed(ours)
		}
		i++
		wo, wp, co, cp = append(wo, ow), append(wp, pw), append(co, oc), append(cp, pc)
		rw = append(rw, pw/ow)
		if oc > 0 {
			rc = append(rc, pc/oc)
		}
	}
	b.ReportMetric(median(wo), "ours-ns/call")
	b.ReportMetric(median(wp), "peer-ns/call")
	b.ReportMetric(median(co), "ours-cpu-ns/call")
	b.ReportMetric(median(cp), "peer-cpu-ns/call")
	b.ReportMetric(median(rw), "peer/ours-wall")
	b.ReportMetric(median(rc), "peer/ours-cpu")
}

// median returns the median of v (0 for none); it sorts v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkSampleLowDimL4 samples B=256 windows of 4 steps from a
// 1,000,000-step low-dim buffer, next to the slice-of-structs peer.
func BenchmarkSampleLowDimL4(b *testing.B) {
	const n, seq = 256, 4
	b.Run("ours", func(b *testing.B) {
		buf, err := Filled(LowDim(), 16, 62500, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Close()
		var bt tensorbuf.Batch
		defer bt.Release()
		b.ReportAllocs()
		for b.Loop() {
			if err := buf.SampleSequencesInto(&bt, n, seq, tensorbuf.SequenceOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-structs", func(b *testing.B) {
		p := newGoPeer(LowDim(), 16, 62500)
		defer p.release()
		b.ReportAllocs()
		for b.Loop() {
			p.sampleIntN(n, seq)
		}
	})
}

// smallCap is BenchmarkAddSmall's buffer size in steps: $SMALLCAP, or
// 65,536.
var smallCap = envInt("SMALLCAP", 1<<16)

// envInt returns the integer in environment variable k, or d.
func envInt(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}
