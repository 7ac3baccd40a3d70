package adamstep

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// state is one parameter vector's inputs to Step.
type state struct{ w, g, m, v []float32 }

func randomState(rng *rand.Rand, n int) state {
	s := state{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		s.w[i] = float32(rng.NormFloat64())
		// Gradients over many magnitudes, zeros and subnormals included.
		switch i % 5 {
		case 0:
			s.g[i] = 0
		case 1:
			s.g[i] = float32(rng.NormFloat64()) * 1e-40
		default:
			s.g[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
		}
		s.m[i] = float32(rng.NormFloat64() * 1e-3)
		s.v[i] = float32(rng.Float64() * 1e-5)
	}
	return s
}

func (s state) clone() state {
	return state{slices.Clone(s.w), slices.Clone(s.g), slices.Clone(s.m), slices.Clone(s.v)}
}

func coeffs(t int) *Coeffs {
	b1, b2 := float32(0.9), float32(0.999)
	return &Coeffs{Beta1: b1, Beta2: b2, OneMinusBeta1: 1 - b1, OneMinusBeta2: 1 - b2,
		C1: float32(1) / float32(1-math.Pow(0.9, float64(t))), C2: float32(1) / float32(1-math.Pow(0.999, float64(t))),
		Eps: 1e-8, NegLR: -2.3e-3}
}

// TestStepVectorMatchesScalar: over lengths around the vector width and
// 20 steps, Step (vector loop where the CPU has AVX) gives the Go loop's
// bits in w, m and v, and zeroes g.
func TestStepVectorMatchesScalar(t *testing.T) {
	if !hasAVX {
		t.Skip("no vector loop on this CPU or build")
	}
	was512 := useAVX512
	defer func() { useAVX512 = was512 }()
	for _, wide := range []bool{false, true} {
		if wide && !hasAVX512 {
			continue
		}
		useAVX512 = wide
		testVectorMatchesScalar(t)
	}
}

func testVectorMatchesScalar(t *testing.T) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 40, 100, 1027} {
		s := randomState(rng, n)
		want := s.clone()
		for step := 1; step <= 20; step++ {
			c := coeffs(step)
			g := randomState(rng, n).g
			copy(s.g, g)
			copy(want.g, g)
			Step(s.w, s.g, s.m, s.v, c)
			scalar(want.w, want.g, want.m, want.v, c)
			for i := range n {
				for _, p := range [][2]float32{{s.w[i], want.w[i]}, {s.m[i], want.m[i]}, {s.v[i], want.v[i]}} {
					if math.Float32bits(p[0]) != math.Float32bits(p[1]) {
						t.Fatalf("avx512 %v n %d step %d [%d]: vector %v, scalar %v", useAVX512, n, step, i, p[0], p[1])
					}
				}
				if s.g[i] != 0 {
					t.Fatalf("n %d step %d: g[%d] = %v after the step", n, step, i, s.g[i])
				}
			}
		}
	}
}

// TestStepFormula: one step from known values gives the formula's
// result computed in float64 to float32 rounding.
func TestStepFormula(t *testing.T) {
	for _, tc := range []struct {
		w, g, m, v float32
		step       int
	}{{1, 0.5, 0, 0, 1}, {-2, -3, 0.1, 0.2, 5}, {0.25, 0, 0.01, 1e-4, 100}} {
		for _, vec := range []bool{false, true} {
			was := useAVX
			useAVX = vec && hasAVX
			c := coeffs(tc.step)
			w := []float32{tc.w, tc.w, tc.w, tc.w, tc.w, tc.w, tc.w, tc.w, tc.w}
			g := []float32{tc.g, tc.g, tc.g, tc.g, tc.g, tc.g, tc.g, tc.g, tc.g}
			m := []float32{tc.m, tc.m, tc.m, tc.m, tc.m, tc.m, tc.m, tc.m, tc.m}
			v := []float32{tc.v, tc.v, tc.v, tc.v, tc.v, tc.v, tc.v, tc.v, tc.v}
			Step(w, g, m, v, c)
			useAVX = was
			m64 := 0.9*float64(tc.m) + 0.1*float64(tc.g)
			v64 := 0.999*float64(tc.v) + 0.001*float64(tc.g)*float64(tc.g)
			w64 := float64(tc.w) - 2.3e-3*m64*float64(c.C1)/(math.Sqrt(v64*float64(c.C2))+1e-8)
			for i := range w {
				if math.Abs(float64(w[i])-w64) > 1e-6*math.Max(1, math.Abs(w64)) || g[i] != 0 {
					t.Fatalf("%+v vector %v: w %v, want %v; g %v", tc, vec, w[i], w64, g[i])
				}
			}
		}
	}
}

func BenchmarkStep(b *testing.B) {
	s := randomState(rand.New(rand.NewPCG(1, 1)), 67330)
	c := coeffs(10)
	for b.Loop() {
		Step(s.w, s.g, s.m, s.v, c)
	}
}
