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
// overflowing exponents) and non-positive weights.
func TestImportanceMatchesPow(t *testing.T) {
	betas := []float64{0, 1e-300, 0.1, 0.4, 0.4999999, 0.5, 0.5000001, 0.6, 0.9, 1, 1.2, 1.5, 2, 2.7, 3, 7.25, 64, 1000.5, 1 << 20, 1e300}
	wMins := []float64{1e-308, 5e-324, 1e-10, 0.3, 1, 3.7, 1e300}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, beta := range betas {
		for _, wMin := range wMins {
			m := newImportance(beta, wMin)
			ws := []float64{0, -0.0, wMin, math.Nextafter(wMin, math.Inf(1)), 2 * wMin, math.MaxFloat64, 1e308, 1}
			for range 200 {
				ws = append(ws, wMin*math.Exp(rng.Float64()*700))
			}
			for _, w := range ws {
				want := 1.0
				if beta != 0 && w > 0 {
					want = math.Min(1, math.Pow(w/wMin, -beta))
				}
				if got := m.of(w); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("beta %v wMin %v w %v: of = %v, math.Pow gives %v", beta, wMin, w, got, want)
				}
			}
		}
	}
	// No positive weight in the table: every weight is 1.
	m := newImportance(0.4, 0)
	if got := m.of(3); got != 1 {
		t.Fatalf("wMin 0: of = %v, want 1", got)
	}
}
