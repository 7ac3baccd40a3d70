package envs

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestSinCosBitIdentical holds sinCos to math.Cos and math.Sin bit for bit:
// random angles across the fast range and past it, the range's edge, signed
// zeros, subnormals and the special values.
func TestSinCosBitIdentical(t *testing.T) {
	edge := math.Pi / 4
	xs := []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1e-300, CartPoleThetaThreshold, -CartPoleThetaThreshold,
		edge, -edge, math.Nextafter(edge, 0), math.Nextafter(edge, 1), math.Nextafter(-edge, 0), 1, -1, 3, 100, 1e30,
		math.Inf(1), math.Inf(-1), math.NaN()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		xs = append(xs, (rng.Float64()*2-1)*math.Pi/3, (rng.Float64()*2-1)*0.3, math.Ldexp(rng.Float64(), -rng.IntN(60)))
	}
	for _, x := range xs {
		c, s := sinCos(x)
		if wc, ws := math.Cos(x), math.Sin(x); math.Float64bits(c) != math.Float64bits(wc) || math.Float64bits(s) != math.Float64bits(ws) {
			t.Fatalf("sinCos(%v) = %v, %v; math gives %v, %v", x, c, s, wc, ws)
		}
	}
}

// TestCartPoleBatchMatchesRowByRow steps a 64-row CartPole (two passes over
// the rows) and 64 single cart-poles (step, row by row) with the same seed
// and random actions for 3,000 steps, through resets, and finds the same
// observations bit for bit.
func TestCartPoleBatchMatchesRowByRow(t *testing.T) {
	const n = 64
	c, err := NewCartPole(n, 9)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.Reset()
	if err != nil {
		t.Fatal(err)
	}
	single := make([]cartPoleState, n)
	steps := make([]int, n)
	rngs := make([]*rand.Rand, n)
	for r := range single {
		rngs[r] = rowRNG(9, r)
		single[r].reset(rngs[r])
	}
	acts := rand.New(rand.NewPCG(3, 4))
	a := make([]int64, n)
	for k := range 3000 {
		last := make([]bool, n)
		for r := range a {
			a[r] = int64(acts.IntN(2))
			last[r] = ts.StepType[r] == tensorbuf.Last
		}
		if ts, err = c.Step(actions(a...)); err != nil {
			t.Fatal(err)
		}
		obs := ts.Observation[CartPoleObservationName].Float32s()
		for r := range single {
			if last[r] {
				single[r].reset(rngs[r])
				steps[r] = 0
			} else {
				single[r].step(a[r])
				steps[r]++
			}
			for i, v := range single[r] {
				if obs[4*r+i] != float32(v) {
					t.Fatalf("step %d row %d: batched observation %v, row by row %v", k, r, obs[4*r:4*r+4], single[r])
				}
			}
		}
	}
}
