package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/impl"
	"github.com/trajring/trajring/kernels"
)

// TestScatterNonTemporal runs Scatter on steps that the non-temporal
// path takes (ntMinRing lowered so that a small arena qualifies) and on
// neighbours that it must not take, against the loop Scatter's doc
// comment spells out: every byte of the arena, the bytes around each
// step included, must match, with the path on and off.
func TestScatterNonTemporal(t *testing.T) {
	defer func(old int64) { ntMinRing = old }(ntMinRing)
	ntMinRing = 0
	defer impl.Reset("cpu")
	avail := ntAvailable()
	cases := []struct {
		step, stride, offset int64
		rows                 int
		nt                   bool
	}{
		{step: 3072, stride: 3072, rows: 16, nt: true},
		{step: 3072, stride: 3072, rows: 4, nt: true},
		{step: 3072, stride: 3072, rows: 3, nt: false}, // too few rows
		{step: 3072, stride: 3072, rows: 1, nt: false}, // one row's stream
		{step: 256, stride: 320, offset: 32, rows: 5, nt: true},
		{step: 256, stride: 320, offset: 48, rows: 5, nt: false}, // ring not 32-byte aligned
		{step: 192, stride: 192, rows: 8, nt: false},             // too small
		{step: 288, stride: 288, rows: 8, nt: false},             // not a multiple of 64
		{step: 3072, stride: 3088, rows: 8, nt: false},           // stride not a multiple of 32
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range cases {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("step=%d/stride=%d/offset=%d/rows=%d/on=%v", tc.step, tc.stride, tc.offset, tc.rows, on), func(t *testing.T) {
				if on && !avail {
					t.Skip("no non-temporal stores on this CPU or build")
				}
				if !impl.Set("cpu", "scatter-nt", on) {
					t.Fatalf("cannot switch scatter-nt to %v", on)
				}
				const steps = 40
				a, err := alloc(steps * tc.stride)
				if err != nil {
					t.Fatal(err)
				}
				defer free(a)
				fillBytes(rng, a.b)
				col := kernels.Column{Ring: a, StepBytes: tc.step, Stride: tc.stride, Offset: tc.offset}
				idx := make([]int64, tc.rows)
				for i := range idx {
					idx[i] = rng.Int64N(steps)
				}
				idx[len(idx)-1] = idx[0] // a repeat: the later step wins
				// A source one byte into its slice: unaligned loads.
				buf := make([]byte, int64(tc.rows)*tc.step+1)
				fillBytes(rng, buf)
				src := buf[1:]
				want := bytes.Clone(a.b)
				for i, ix := range idx {
					o := ix*tc.stride + tc.offset
					copy(want[o:o+tc.step], src[int64(i)*tc.step:])
				}
				if got := ntScatter(a.b[tc.offset:], tc.step, tc.stride, tc.rows); got != (tc.nt && on) {
					t.Fatalf("ntScatter = %v, want %v", got, tc.nt && on)
				}
				if err := New().Scatter([]kernels.Column{col}, [][]byte{src}, idx); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.b, want) {
					t.Fatal("ring differs from the reference")
				}
			})
		}
	}
}

// ntAvailable reports whether this CPU and build run non-temporal
// scatters.
func ntAvailable() bool {
	for _, x := range impl.List("cpu") {
		if x.Name == "scatter-nt" {
			return x.Available
		}
	}
	return false
}

func fillBytes(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
