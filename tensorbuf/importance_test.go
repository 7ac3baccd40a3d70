package tensorbuf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestImportanceMatchesPow checks that importance.of, which hoists the
// beta-only part of math.Pow out of the per-item loop, returns exactly
// math.Min(1, math.Pow(w/wMin, -beta)), bit for bit, on every path:
// beta below and above 0.5 (math.Pow moves the fraction), integer and
// mixed betas, math.Pow's own special cases, extreme ratios (under- and
// overflowing exponents) and non-positive weights; and that importance.many
// (the batch of a sample, with Exp and Log eight or four at a time) returns the
// same.
func TestImportanceMatchesPow(t *testing.T) {
	t.Parallel() // touches no shared state; runs beside the other sweeps
	betas := []float64{0, 1e-300, 0.1, 0.4, 0.4999999, 0.5, 0.5000001, 0.6, 0.9, 1, 1.2, 1.5, 2, 2.7, 3, 7.25, 64, 1000.5, 1 << 20, 1e300}
	wMins := []float64{1e-308, 5e-324, 1e-10, 0.3, 1, 3.7, 1e300}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, beta := range betas {
		for _, wMin := range wMins {
			m := newImportance(beta, wMin)
			ws := []float64{0, -0.0, wMin, math.Nextafter(wMin, math.Inf(1)), 2 * wMin, math.MaxFloat64, 1e308, 1}
			for range 200 / sweepStride {
				ws = append(ws, wMin*math.Exp(rng.Float64()*700))
			}
			for range 200 / sweepStride {
				ws = append(ws, math.Float64frombits(rng.Uint64N(0x7FF0000000000000))) // any finite non-negative
			}
			wants := make([]float64, len(ws))
			for i, w := range ws {
				want := 1.0
				if beta != 0 && w > 0 {
					want = math.Min(1, math.Pow(w/wMin, -beta))
				}
				if got := m.of(w); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("beta %v wMin %v w %v: of = %v, math.Pow gives %v", beta, wMin, w, got, want)
				}
				wants[i] = want
			}
			// many, over every length up to 17 from every start (groups of
			// four and eight, and tails), and the whole list.
			dst := make([]float64, len(ws))
			for lo := range ws {
				for hi := lo; hi <= min(lo+17, len(ws)); hi++ {
					m.many(dst[lo:hi], ws[lo:hi])
					for i := lo; i < hi; i++ {
						if math.Float64bits(dst[i]) != math.Float64bits(wants[i]) {
							t.Fatalf("beta %v wMin %v w %v: many[%d:%d] = %v, math.Pow gives %v", beta, wMin, ws[i], lo, hi, dst[i], wants[i])
						}
					}
				}
			}
			m.many(dst, ws)
			for i, want := range wants {
				if math.Float64bits(dst[i]) != math.Float64bits(want) {
					t.Fatalf("beta %v wMin %v w %v: many = %v, math.Pow gives %v", beta, wMin, ws[i], dst[i], want)
				}
			}
		}
	}
	// No positive weight in the table: every weight is 1.
	m := newImportance(0.4, 0)
	dst := []float64{0}
	if m.many(dst, []float64{3}); m.of(3) != 1 || dst[0] != 1 {
		t.Fatalf("wMin 0: of = %v, many = %v, want 1", m.of(3), dst[0])
	}
}

// BenchmarkImportanceMany computes the importance weights of a 256-draw
// sample at beta 0.4, ratios to the smallest weight in [1, 100].
func BenchmarkImportanceMany(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ws, dst := make([]float64, 256), make([]float64, 256)
	for i := range ws {
		ws[i] = 0.5 + rng.Float64()*50
	}
	m := newImportance(0.4, 0.5)
	for b.Loop() {
		m.many(dst, ws)
	}
}
