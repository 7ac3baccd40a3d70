package treestep

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// reference is Level's reference loop, as its doc comment writes it.
func reference(level []uint64, us []float64, out []int32, start int) int {
	for d := start; d < len(out); d++ {
		if out[d] < 0 || int(out[d]) >= len(level)/Fanout {
			return d
		}
		ps := level[Fanout*int(out[d]):][:Fanout]
		j := 0
		for _, p := range ps {
			if math.Float64bits(us[d]) >= p {
				j++
			}
		}
		if j == Fanout {
			return d
		}
		if j > 0 {
			us[d] -= math.Float64frombits(ps[j-1])
		}
		out[d] = Fanout*out[d] + int32(j)
	}
	return len(out)
}

// randomLevel returns a level of groups groups of running sums of random
// weights, zeros, equal neighbours and tiny values among them.
func randomLevel(rng *rand.Rand, groups int) []uint64 {
	level := make([]uint64, groups*Fanout)
	for g := range groups {
		acc := 0.0
		for k := range Fanout {
			var w float64
			switch rng.IntN(6) {
			case 0: // zero weight: a sum equal to the one before
			case 1:
				w = math.SmallestNonzeroFloat64 * float64(rng.IntN(4))
			case 2:
				w = math.Ldexp(rng.Float64(), rng.IntN(80)-40)
			default:
				w = rng.Float64() * 10
			}
			acc += w
			level[g*Fanout+k] = math.Float64bits(acc)
		}
	}
	return level
}

// impls are Level's loops, named for messages.
var impls = []struct {
	impl int
	name string
}{{implGo, "go"}, {implAVX2, "avx2"}, {implAVX512, "avx512"}}

// eachImpl runs f with Level switched to each loop this CPU can run, and
// logs the ones it cannot (a test on such a CPU checks the others), then
// restores the widest.
func eachImpl(t testing.TB, f func(name string)) {
	defer func() { levelAsm = best() }()
	for _, im := range impls {
		if !setImpl(im.impl) {
			t.Logf("%s: not run, this CPU lacks it", im.name)
			continue
		}
		f(im.name)
	}
}

// TestLevelMatchesReference compares Level (each assembly loop the CPU
// has, and the Go loop) with the reference loop on random levels
// and draws: masses below, at, between and past the sums (the stop of a
// mass at or past a group's last sum), groups past the level and
// negative (the stop for a bad group), every start.
func TestLevelMatchesReference(t *testing.T) {
	seed := uint64(0)
	eachImpl(t, func(impl string) {
		seed++
		rng := rand.New(rand.NewPCG(1, seed))
		for round := range 400 {
			groups := 1 + rng.IntN(20)
			level := randomLevel(rng, groups)
			n := rng.IntN(40)
			us, out := make([]float64, n), make([]int32, n)
			for d := range n {
				g := rng.IntN(groups)
				out[d] = int32(g)
				last := math.Float64frombits(level[g*Fanout+Fanout-1])
				switch rng.IntN(8) {
				case 0:
					us[d] = math.Float64frombits(level[g*Fanout+rng.IntN(Fanout)]) // exactly a sum
				case 1:
					us[d] = last * (1 + rng.Float64()) // at or past the last sum
				case 2:
					us[d] = 0
				case 3:
					out[d] = int32(groups + rng.IntN(3)) // past the level
				case 4:
					out[d] = -1 - int32(rng.IntN(3))
				default:
					us[d] = rng.Float64() * last
				}
			}
			start := 0
			if n > 0 {
				start = rng.IntN(n + 1)
			}
			wu, wo := slices.Clone(us), slices.Clone(out)
			want := reference(level, wu, wo, start)
			got := Level(level, us, out, start)
			if got != want || !slices.Equal(out, wo) || !slices.EqualFunc(us, wu, func(a, b float64) bool {
				return math.Float64bits(a) == math.Float64bits(b)
			}) {
				t.Fatalf("%s round %d: stopped at %d, want %d\nout %v\nwant %v\nus %v\nwant %v", impl, round, got, want, out, wo, us, wu)
			}
		}
	})
}

// TestLevelWholeDescent descends a three-level tree draw by draw with
// Level, resuming after each stop past a group's last sum, and checks
// each draw lands on the leaf whose cumulative range holds it.
func TestLevelWholeDescent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const leaves = Fanout * Fanout * Fanout
	w := make([]float64, leaves)
	for i := range w {
		if rng.IntN(4) > 0 {
			w[i] = rng.Float64()
		}
	}
	// levels[0] leaves' running sums per group, levels[1] of the groups'
	// sums, levels[2] the root's group.
	sums := func(v []float64) ([]uint64, []float64) {
		level := make([]uint64, len(v))
		var up []float64
		for g := 0; g < len(v); g += Fanout {
			acc := 0.0
			for k := range Fanout {
				acc += v[g+k]
				level[g+k] = math.Float64bits(acc)
			}
			up = append(up, acc)
		}
		return level, up
	}
	l0, s1 := sums(w)
	l1, s2 := sums(s1)
	l2, _ := sums(s2)
	total := math.Float64frombits(l2[Fanout-1])
	eachImpl(t, func(impl string) {
		n := 1000
		us, out := make([]float64, n), make([]int32, n)
		orig := make([]float64, n)
		for d := range us {
			us[d] = rng.Float64() * total
			orig[d] = us[d]
		}
		for _, level := range [][]uint64{l2, l1, l0} {
			for d := 0; d < n; d++ {
				if d = Level(level, us, out, d); d < n {
					t.Fatalf("%s: draw %d of mass %v stopped", impl, d, orig[d])
				}
			}
		}
		// Each leaf reached holds a positive weight and the remaining mass
		// lies inside it.
		for d, s := range out {
			if w[s] == 0 || us[d] < 0 || us[d] >= w[s]*(1+1e-9) {
				t.Fatalf("%s: draw %d: leaf %d (weight %v), remaining mass %v", impl, d, s, w[s], us[d])
			}
		}
	})
}

// BenchmarkLevel moves 256 draws one level down a level of 64 groups (in
// the cache) and of 32,768 groups (2 MiB), with each loop; copying the
// draws' random groups and masses into place is included.
func BenchmarkLevel(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, groups := range []int{64, 32768} {
		level := randomLevel(rng, groups)
		for g := range groups { // no zero-weight tail: few stops
			acc := 0.0
			for k := range Fanout {
				acc += 1 + float64(k)
				level[g*Fanout+k] = math.Float64bits(acc)
			}
		}
		const n = 256
		us, out := make([]float64, n), make([]int32, n)
		us0, out0 := make([]float64, n), make([]int32, n)
		for d := range n {
			out0[d], us0[d] = int32(rng.IntN(groups)), float64(rng.IntN(36))
		}
		for _, im := range impls {
			b.Run(fmt.Sprintf("%s/groups=%d", im.name, groups), func(b *testing.B) {
				if !setImpl(im.impl) {
					b.Skipf("this CPU lacks %s", im.name)
				}
				defer func() { levelAsm = best() }()
				for b.Loop() {
					copy(us, us0)
					copy(out, out0)
					for d := 0; d < n; d++ {
						d = Level(level, us, out, d)
					}
				}
			})
		}
	}
}
