package tensorbuf

import (
	"math/rand/v2"
	"testing"
)

// TestFindManyMatchesFind checks the batched descent against find, draw
// by draw, on random trees with zero-weight slots, and the sums and
// minima against a direct computation.
func TestFindManyMatchesFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		var tr sumTree
		slots := 1 + rng.IntN(300)
		tr.grow(slots)
		var sum float64
		minPos := 1e300
		for s := range slots {
			w := 0.0
			if rng.IntN(4) > 0 {
				w = rng.Float64() * 10
			}
			tr.set(s, w)
			sum += w
			if w > 0 {
				minPos = min(minPos, w)
			}
		}
		if sum == 0 {
			continue
		}
		if d := tr.total() - sum; d > 1e-9 || d < -1e-9 {
			t.Fatalf("trial %d: total %v, want %v", trial, tr.total(), sum)
		}
		if tr.minPositive() != minPos {
			t.Fatalf("trial %d: min %v, want %v", trial, tr.minPositive(), minPos)
		}
		us := make([]float64, 64)
		for k := range us {
			us[k] = rng.Float64() * tr.total()
		}
		us[0] = 0
		us[1] = tr.total() * (1 - 1e-16) // rounding at the top end
		want := make([]int32, len(us))
		for k, u := range us {
			want[k] = int32(tr.find(u))
			if tr.get(int(want[k])) <= 0 {
				t.Fatalf("trial %d: find(%v) landed on zero-weight slot %d", trial, u, want[k])
			}
		}
		got := make([]int32, len(us))
		tr.findMany(append([]float64(nil), us...), got)
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("trial %d draw %d (u=%v): findMany %d, find %d", trial, k, us[k], got[k], want[k])
			}
		}
	}
}
