package explog

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGoFallbacks checks the Go forms of the vector loops (what vector,
// vector8 and weights8 are where there is no assembly) against the
// reference loops, bit for bit, on values that include zeros,
// subnormal, huge and infinite ratios.
func TestGoFallbacks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	odd := []float64{0, 0x1p-1074, 0x1p-1030, math.MaxFloat64, math.Inf(1), 1, 0.5}
	for round := range 200 {
		n := 8 * (1 + r.IntN(6))
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = r.Float64() * 4
			if r.IntN(16) == 0 {
				xs[i] = odd[r.IntN(len(odd))]
			}
		}
		y := r.Float64()
		dst, ref := make([]float64, n), make([]float64, n)
		scalar(ref, xs, y)
		if got := vectorGo(dst, xs, y); got != n || !sameAll(dst, ref) {
			t.Fatalf("round %d: vectorGo did %d of %d, or differs from the reference", round, got, n)
		}
		d := 0.25 + r.Float64()
		clear(dst)
		got := weights8Go(dst, xs, d, y)
		want := n
		for g := 0; g < n && want == n; g += 8 {
			for _, x := range xs[g : g+8] {
				if !normal(x / d) {
					want = g
				}
			}
		}
		if got != want {
			t.Fatalf("round %d: weights8Go stopped at %d, want %d", round, got, want)
		}
		for i := range dst {
			w := 0.0 // unwritten
			if i < want {
				w = min(1, 1/math.Exp(y*math.Log(xs[i]/d)))
			}
			if !same(dst[i], w) {
				t.Fatalf("round %d: weights8Go[%d] = %v, want %v", round, i, dst[i], w)
			}
		}
	}
}

func sameAll(a, b []float64) bool {
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}
