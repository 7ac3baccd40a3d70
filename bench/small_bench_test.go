package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// BenchmarkAddSmall adds batched steps of W rows to a pixels buffer of
// smallCap steps, next to the slice-of-structs peer's add of the same
// rows: the per-call cost of the add rows (a small SMALLCAP, such as 128,
// keeps the ring in the cache and leaves the per-call work).
func BenchmarkAddSmall(b *testing.B) {
	l := Pixels()
	for _, w := range []int{1, 16, 128} {
		capacity := max(1, smallCap/w)
		b.Run(fmt.Sprintf("W=%d/ours", w), func(b *testing.B) {
			buf, err := Filled(l, w, capacity, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer buf.Close()
			wr, err := buf.NewWriter()
			if err != nil {
				b.Fatal(err)
			}
			defer wr.Close()
			st := newStepper(l, wr.Rows())
			t := buf.Cursor(0)
			b.ReportAllocs()
			for b.Loop() {
				if err := wr.Add(st.at(t)); err != nil {
					b.Fatal(err)
				}
				t++
			}
		})
		b.Run(fmt.Sprintf("W=%d/go-structs", w), func(b *testing.B) {
			p := newGoPeer(l, w, capacity)
			defer p.release()
			cur := 0
			b.ReportAllocs()
			for b.Loop() {
				p.addRows(w, cur)
				cur++
			}
		})
	}
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
