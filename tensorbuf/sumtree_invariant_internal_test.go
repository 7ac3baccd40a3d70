package tensorbuf

import (
	"math"
	"testing"
)

// TestSumTreeTotalAsserted: a tree's total is at least 0 (weights are
// stored >= 0, never NaN), so one corrupted to a negative or NaN sum
// panics naming it instead of being read as an empty tree (which samples
// uniformly); +Inf, which overflowing running sums can give, and 0 are
// totals.
func TestSumTreeTotalAsserted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  float64 // the root's running sum, as corrupted
		panic string  // "" when total returns root
	}{
		{"zero", 0, ""},
		{"positive", 3.5, ""},
		{"overflowed", math.Inf(1), ""},
		{"negative", -2, "tensorbuf: internal error: sum tree total -2"},
		{"negative-inf", math.Inf(-1), "tensorbuf: internal error: sum tree total -Inf"},
		{"nan", math.NaN(), "tensorbuf: internal error: sum tree total NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr sumTree
			tr.grow(64)
			tr.set(3, 1.5)
			tr.set(40, 2)
			if got := tr.total(); got != 3.5 {
				t.Fatalf("total of weights 1.5 and 2 = %v, want 3.5", got)
			}
			top := tr.sum[len(tr.sum)-1]
			top[treeFanout-1] = tc.root
			var got float64
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg, _ = r.(string)
						if msg == "" {
							msg = "non-string panic"
						}
					}
				}()
				got = tr.total()
				return ""
			}()
			if msg != tc.panic {
				t.Fatalf("total of a root sum %v: panic %q, want %q", tc.root, msg, tc.panic)
			}
			if tc.panic == "" && got != tc.root {
				t.Fatalf("total = %v, want %v", got, tc.root)
			}
		})
	}
}
