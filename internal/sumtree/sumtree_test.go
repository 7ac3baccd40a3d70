package sumtree

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/treestep"
	"github.com/trajring/trajring/kernels"
)

// TestParentMatchesDeviceLayout checks that the levels Parent gives are
// the ones kernels.Tree lays out for the device, for every tree size the
// kernels take up to 2^24 leaves.
func TestParentMatchesDeviceLayout(t *testing.T) {
	for n := int64(Fanout); n <= 1<<24; n *= 2 {
		lay := kernels.Tree(n)
		var sizes []int64
		for s := int(n); ; s = Parent(s) {
			sizes = append(sizes, int64(s))
			if s == Fanout {
				break
			}
		}
		if len(sizes) != lay.Levels {
			t.Fatalf("%d leaves: %d levels, kernels.Tree %d", n, len(sizes), lay.Levels)
		}
		for l, s := range sizes {
			if s != lay.Size[l] {
				t.Fatalf("%d leaves: level %d of %d nodes, kernels.Tree %d", n, l, s, lay.Size[l])
			}
		}
	}
	for _, tc := range []struct{ size, want int }{{8, 8}, {16, 8}, {64, 8}, {72, 16}, {512, 64}, {1 << 20, 1 << 17}} {
		if got := Parent(tc.size); got != tc.want {
			t.Errorf("Parent(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestChild(t *testing.T) {
	ps := [Fanout]float64{0, 1, 1, 3, 3.5, 3.5, 3.5, 3.5} // nodes 0, 2, 5, 6, 7 of sum 0
	cases := []struct {
		u     float64
		j     int
		left  float64
		label string
	}{
		{0, 1, 0, "u 0 skips the empty first node"},
		{0.25, 1, 0.25, "inside node 1"},
		{1, 3, 0, "at a running sum: the next node of positive sum"},
		{2.5, 3, 1.5, "inside node 3"},
		{3.25, 4, 0.25, "inside node 4"},
		{3.5, 4, 0.5, "at the group's sum (rounding): the last rising node"},
		{4, 4, 1, "past the group's sum"},
	}
	for _, tc := range cases {
		j, left := Child(&ps, tc.u)
		if j != tc.j || left != tc.left {
			t.Errorf("%s: Child(%v) = %d, %v; want %d, %v", tc.label, tc.u, j, left, tc.j, tc.left)
		}
	}
	var zero [Fanout]float64
	if j, left := Child(&zero, 0.5); j != 0 || left != 0.5 {
		t.Errorf("group of sum 0: %d, %v; want 0, 0.5", j, left)
	}
}

// TestChildMatchesLevel checks Child against treestep.Level (the
// batched descent tensorbuf runs) on random groups and draws: where Level
// moves a draw, Child picks the same node and leaves the same mass, bit
// for bit; where Level stops (at or past the group's sum), Child is
// ChildPast.
func TestChildMatchesLevel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var ps [Fanout]float64
		acc := 0.0
		for j := range ps {
			if r.IntN(3) > 0 {
				acc += r.Float64() * 10
			}
			ps[j] = acc
		}
		u := r.Float64() * acc * 1.01
		if r.IntN(8) == 0 {
			u = ps[r.IntN(Fanout)]
		}
		j, left := Child(&ps, u)
		var bits [Fanout]uint64
		for i, p := range ps {
			bits[i] = math.Float64bits(p)
		}
		us, out := []float64{u}, []int32{0}
		if treestep.Level(bits[:], us, out, 0) == 1 {
			if int(out[0]) != j || math.Float64bits(us[0]) != math.Float64bits(left) {
				t.Fatalf("ps %v u %v: Child %d, %v; Level %d, %v", ps, u, j, left, out[0], us[0])
			}
			continue
		}
		pj, pleft := ChildPast(&ps, u)
		if u < ps[Fanout-1] || pj != j || math.Float64bits(pleft) != math.Float64bits(left) {
			t.Fatalf("ps %v u %v: Level stops, Child %d, %v, ChildPast %d, %v", ps, u, j, left, pj, pleft)
		}
	}
}
