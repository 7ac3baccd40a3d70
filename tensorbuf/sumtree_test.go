package tensorbuf

import (
	"math"
	"math/rand/v2"
	"slices"
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
		us[2] = tr.total()               // past the end: the last positive leaf
		// Exactly on the leaves' running sums, where the leaf descent
		// (which forms them from the weights) must agree with sum[0].
		for k := 3; k < 16; k++ {
			us[k] = tr.sum[0][rng.IntN(slots)]
		}
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

// TestSumTreeGrowOrder checks that the tree is a function of its weights
// alone: grown in one step or slot by slot (as a table grows it), set in
// any order, it holds the same bits; and that undoing a set restores them.
func TestSumTreeGrowOrder(t *testing.T) {
	const slots = 700
	w := make([]float64, slots)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range w {
		if rng.IntN(5) > 0 {
			w[i] = rng.Float64() * 100
		}
	}
	var a, b sumTree
	a.grow(slots)
	for i := slots - 1; i >= 0; i-- {
		a.set(i, w[i])
	}
	for i := range slots {
		b.grow(i + 1)
		b.set(i, w[i])
	}
	same := func(x, y *sumTree) bool {
		return x.n == y.n && slices.Equal(x.w, y.w) && slices.EqualFunc(x.sum, y.sum, slices.Equal) &&
			slices.EqualFunc(x.min, y.min, func(p, q []float64) bool { return slices.Equal(p, q) })
	}
	if !same(&a, &b) {
		t.Fatal("trees differ with the order of grow and set")
	}
	if a.n != 1024 || len(a.sum) != 4 {
		t.Fatalf("capacity %d, %d levels; want 1024 and 4", a.n, len(a.sum))
	}
	old := a.get(123)
	a.set(123, 1e6)
	a.set(123, old)
	if !same(&a, &b) {
		t.Fatal("undoing a set did not restore the tree bit for bit")
	}
}

// TestSumTreeFindRanges checks find against a linear scan of the
// weights: the slot found has a positive weight and its cumulative range
// holds u, up to rounding; including u = 0, u just below the total, and
// runs of zero weights.
func TestSumTreeFindRanges(t *testing.T) {
	cases := []struct {
		name string
		w    []float64
		us   []float64 // fractions of the total
		want []int
	}{
		{"one", []float64{0, 0, 5}, []float64{0, 0.5, 1 - 1e-16}, []int{2, 2, 2}},
		{"zeros between", []float64{1, 0, 0, 1}, []float64{0, 0.49, 0.5, 0.99}, []int{0, 0, 3, 3}},
		{"last positive", []float64{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []float64{1 - 1e-16}, []int{1}},
		{"across groups", []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []float64{0, 8.0 / 18, 9.5 / 18, 17.5 / 18}, []int{0, 8, 9, 17}},
	}
	for _, c := range cases {
		var tr sumTree
		tr.grow(len(c.w))
		for i, w := range c.w {
			tr.set(i, w)
		}
		for k, f := range c.us {
			if got := tr.find(f * tr.total()); got != c.want[k] {
				t.Errorf("%s: find(%v of total) = %d, want %d", c.name, f, got, c.want[k])
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 20 {
		n := 1 + rng.IntN(5000)
		var tr sumTree
		tr.grow(n)
		cum := make([]float64, n+1)
		for i := range n {
			w := 0.0
			if rng.IntN(3) > 0 {
				w = rng.ExpFloat64()
			}
			tr.set(i, w)
			cum[i+1] = cum[i] + w
		}
		if tr.total() == 0 {
			continue
		}
		eps := 1e-12 * tr.total()
		for range 200 {
			u := rng.Float64() * tr.total()
			s := tr.find(u)
			if tr.get(s) <= 0 || u < cum[s]-eps || u > cum[s+1]+eps {
				t.Fatalf("trial %d: find(%v) = %d, range [%v, %v) weight %v", trial, u, s, cum[s], cum[s+1], tr.get(s))
			}
		}
	}
}

// TestSumTreeNearMaxTotal fills a tree with weights summing to just
// below maxTreeTotal (the bound table.go enforces) and checks that every
// running sum and minimum is finite and the descent stays in range.
func TestSumTreeNearMaxTotal(t *testing.T) {
	for _, n := range []int{3, 64, 1000, 4097} {
		var tr sumTree
		tr.grow(n)
		for i := range n {
			tr.set(i, maxTreeTotal/float64(n)*(1-1e-15))
		}
		if !(tr.total() <= maxTreeTotal) {
			t.Fatalf("n=%d: total %v above maxTreeTotal", n, tr.total())
		}
		for l, lv := range tr.sum {
			for i, s := range lv {
				if math.IsInf(s, 0) || math.IsNaN(s) {
					t.Fatalf("n=%d: running sum %d of level %d is %v", n, i, l, s)
				}
			}
		}
		for _, f := range []float64{0, 0.5, 1 - 1e-16} {
			if s := tr.find(f * tr.total()); s < 0 || s >= n {
				t.Fatalf("n=%d: find(%v of total) = %d", n, f, s)
			}
		}
	}
}

// TestFindManySplit checks a descent large enough to be split over the
// fanout workers (in chunks, the last one short) against find, draw by
// draw.
func TestFindManySplit(t *testing.T) {
	var tr sumTree
	const slots = 5000
	tr.grow(slots)
	rng := rand.New(rand.NewPCG(3, 4))
	for s := range slots {
		if rng.IntN(4) != 0 {
			tr.set(s, rng.Float64()*10)
		}
	}
	n := treeSplit + 3*treeGrain/2 + 7
	us := make([]float64, n)
	for k := range us {
		us[k] = rng.Float64() * tr.total()
	}
	got := make([]int32, n)
	tr.findMany(append([]float64(nil), us...), got)
	for k, u := range us {
		if want := int32(tr.find(u)); got[k] != want {
			t.Fatalf("draw %d of %d (u=%v): findMany %d, find %d", k, n, u, got[k], want)
		}
	}
}
