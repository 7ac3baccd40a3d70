package sgemm

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// kernel names a kernel setting: the Go kernel, the AVX2/FMA kernel
// alone, or with the 512-bit kernel for pairs of panels.
type kernelSet struct {
	name        string
	fma, avx512 bool
}

// kernels are the settings this CPU can run.
func kernels() []kernelSet {
	ks := []kernelSet{{"go", false, false}}
	if hasFMA {
		ks = append(ks, kernelSet{"fma", true, false})
	}
	if hasAVX512 {
		ks = append(ks, kernelSet{"avx512", true, true})
	}
	return ks
}

// withKernel runs f with the given kernels on.
func withKernel(t *testing.T, k kernelSet, f func()) {
	t.Helper()
	wasFMA, was512 := useFMA, useAVX512
	useFMA, useAVX512 = k.fma, k.avx512
	defer func() { useFMA, useAVX512 = wasFMA, was512 }()
	f()
}

// problem is one Gemm call's inputs; ref computes its result in float64.
type problem struct {
	transA, transB   bool
	m, n, k          int
	alpha, beta      float32
	lda, ldb, ldc    int
	a, b, c          []float32
	padA, padB, padC int // extra columns of stride
}

func newProblem(rng *rand.Rand, transA, transB bool, m, n, k int, alpha, beta float32, pad int, ints bool) *problem {
	p := &problem{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	p.lda, p.ldb, p.ldc = ac+pad, bc+pad, n+pad
	fill := func(rows, ld int) []float32 {
		xs := make([]float32, rows*ld)
		for i := range xs {
			if ints {
				xs[i] = float32(rng.IntN(9) - 4)
			} else {
				xs[i] = float32(rng.NormFloat64())
			}
		}
		return xs
	}
	p.a, p.b, p.c = fill(ar, p.lda), fill(br, p.ldb), fill(m, p.ldc)
	return p
}

func (p *problem) at(x []float32, ld int, trans bool, i, j int) float64 {
	if trans {
		return float64(x[j*ld+i])
	}
	return float64(x[i*ld+j])
}

// ref returns the result in float64 and, per element, the sum of the
// magnitudes of its terms (for a rounding bound).
func (p *problem) ref() (want, mag []float64) {
	want, mag = make([]float64, len(p.c)), make([]float64, len(p.c))
	for i := range p.c {
		want[i] = float64(p.c[i]) // outside the m×n region: unchanged
	}
	for i := range p.m {
		for j := range p.n {
			var s, sm float64
			for q := range p.k {
				x := p.at(p.a, p.lda, p.transA, i, q) * p.at(p.b, p.ldb, p.transB, q, j)
				s += x
				sm += math.Abs(x)
			}
			v, vm := float64(p.alpha)*s, math.Abs(float64(p.alpha))*sm
			if p.beta != 0 {
				v += float64(p.beta) * float64(p.c[i*p.ldc+j])
				vm += math.Abs(float64(p.beta) * float64(p.c[i*p.ldc+j]))
			}
			want[i*p.ldc+j], mag[i*p.ldc+j] = v, vm
		}
	}
	return want, mag
}

func (p *problem) run() ([]float32, error) {
	c := slices.Clone(p.c)
	err := Gemm(p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, c, p.ldc)
	return c, err
}

// TestGemmExact: with small integer inputs every sum is exact, so each
// kernel must give the float64 reference exactly, for every transpose,
// sizes around the tile (6×16) and block edges, padded strides and the
// alpha/beta cases (beta 0 ignoring C, 1, other).
func TestGemmExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {6, 16, 1}, {5, 15, 3}, {7, 17, 9}, {13, 33, 2}, {64, 256, 4}, {64, 2, 256},
		{4, 256, 64}, {12, 48, 31}, {7, 80, 1000}, {2, 300, 70}}
	alphaBeta := [][2]float32{{1, 0}, {1, 1}, {2, -0.5}, {-1, 0}}
	if raceEnabled {
		alphaBeta = alphaBeta[2:3] // the race detector slows the loops ~20x
	}
	for _, sz := range sizes {
		for tr := range 4 {
			for _, ab := range alphaBeta {
				p := newProblem(rng, tr&1 != 0, tr&2 != 0, sz[0], sz[1], sz[2], ab[0], ab[1], 3*(tr&1), true)
				want, _ := p.ref()
				for _, kn := range kernels() {
					withKernel(t, kn, func() {
						got, err := p.run()
						if err != nil {
							t.Fatal(err)
						}
						for i := range got {
							if float64(got[i]) != want[i] {
								t.Fatalf("%s %v tA %v tB %v alpha %v beta %v: c[%d] = %v, want %v", kn.name, sz,
									p.transA, p.transB, ab[0], ab[1], i, got[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

// TestGemmRandom: on random shapes and normal inputs each kernel is
// within float32 rounding of the float64 reference, and the two kernels
// within twice that of each other.
func TestGemmRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	iters := 200
	if raceEnabled {
		iters = 20
	}
	for it := range iters {
		m, n, k := 1+rng.IntN(70), 1+rng.IntN(70), 1+rng.IntN(300)
		alpha := []float32{1, 0.5, -2}[it%3]
		beta := []float32{0, 1, 0.25}[it/3%3]
		p := newProblem(rng, rng.IntN(2) == 0, rng.IntN(2) == 0, m, n, k, alpha, beta, rng.IntN(3), false)
		want, mag := p.ref()
		var outs [][]float32
		for _, kn := range kernels() {
			withKernel(t, kn, func() {
				got, err := p.run()
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					tol := float64(k+2) * 0x1p-24 * mag[i]
					if math.Abs(float64(got[i])-want[i]) > tol {
						t.Fatalf("%s m %d n %d k %d tA %v tB %v: c[%d] = %v, want %v ± %v", kn.name, m, n, k,
							p.transA, p.transB, i, got[i], want[i], tol)
					}
				}
				outs = append(outs, got)
			})
		}
		for i := range outs[0] {
			if d := math.Abs(float64(outs[0][i]) - float64(outs[len(outs)-1][i])); d > 2*float64(k+2)*0x1p-24*mag[i] {
				t.Fatalf("m %d n %d k %d: kernels differ at %d: %v, %v", m, n, k, i, outs[0][i], outs[len(outs)-1][i])
			}
		}
		// The 512-bit kernel runs the same fused chain per element as
		// the 256-bit one: the same bits.
		if len(outs) == 3 {
			for i := range outs[1] {
				if math.Float32bits(outs[1][i]) != math.Float32bits(outs[2][i]) {
					t.Fatalf("m %d n %d k %d: fma %v, avx512 %v at %d", m, n, k, outs[1][i], outs[2][i], i)
				}
			}
		}
	}
}

// TestGemmSplitDeterministic: the result does not depend on how many
// goroutines share the columns, bit for bit.
func TestGemmSplitDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, sz := range [][3]int{{64, 256, 256}, {256, 256, 64}, {37, 301, 129}} {
		for tr := range 4 {
			p := newProblem(rng, tr&1 != 0, tr&2 != 0, sz[0], sz[1], sz[2], 1, 0, 0, false)
			var first []float32
			for _, procs := range []int{1, 2, 3, 8} {
				runtime.GOMAXPROCS(procs)
				got, err := p.run()
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = got
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%v tr %d: GOMAXPROCS %d gives c[%d] = %v, 1 gives %v", sz, tr, procs, i, got[i], first[i])
					}
				}
			}
		}
	}
}

// TestGemmBetaZeroIgnoresC: with beta 0 a NaN in C is overwritten, as
// BLAS specifies; with alpha 0 or k 0, C is only scaled.
func TestGemmBetaZeroIgnoresC(t *testing.T) {
	nan := float32(math.NaN())
	for _, kn := range kernels() {
		withKernel(t, kn, func() {
			for _, tc := range []struct {
				name        string
				k           int
				alpha, beta float32
				want        float32
			}{{"beta 0", 4, 1, 0, 4}, {"alpha 0", 4, 0, 0, 0}, {"k 0", 0, 1, 0, 0}} {
				a, b := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, make([]float32, 4*17)
				for i := range b {
					b[i] = 1
				}
				c := make([]float32, 6*17)
				for i := range c {
					c[i] = nan
				}
				if err := Gemm(false, false, 6, 17, tc.k, tc.alpha, a, max(tc.k, 1), b, 17, tc.beta, c, 17); err != nil {
					t.Fatal(err)
				}
				for i, v := range c {
					if v != tc.want {
						t.Fatalf("%s %s: c[%d] = %v, want %v", kn.name, tc.name, i, v, tc.want)
					}
				}
			}
		})
	}
}

// TestGemmRejects: bad shapes return ErrShape and leave C unchanged.
func TestGemmRejects(t *testing.T) {
	a, b := make([]float32, 12), make([]float32, 12)
	for _, tc := range []struct {
		name             string
		transA, transB   bool
		m, n, k          int
		la, lda, lb, ldb int
		lc, ldc          int
	}{
		{"negative m", false, false, -1, 3, 4, 12, 4, 12, 3, 9, 3},
		{"short A", false, false, 3, 3, 4, 11, 4, 12, 3, 9, 3},
		{"lda below k", false, false, 3, 3, 4, 12, 3, 12, 3, 9, 3},
		{"lda below m (transposed)", true, false, 3, 3, 4, 12, 2, 12, 3, 9, 3},
		{"short B (transposed)", false, true, 3, 3, 4, 12, 4, 11, 4, 9, 3},
		{"ldb below n", false, false, 3, 3, 4, 12, 4, 12, 2, 9, 3},
		{"short C", false, false, 3, 3, 4, 12, 4, 12, 3, 8, 3},
		{"ldc below n", false, false, 3, 3, 4, 12, 4, 12, 3, 9, 2},
	} {
		c := make([]float32, tc.lc)
		for i := range c {
			c[i] = 7
		}
		err := Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, 1, a[:tc.la], tc.lda, b[:tc.lb], tc.ldb, 0, c, tc.ldc)
		if !errors.Is(err, ErrShape) {
			t.Fatalf("%s: err %v, want ErrShape", tc.name, err)
		}
		for _, v := range c {
			if v != 7 {
				t.Fatalf("%s: C changed", tc.name)
			}
		}
	}
}

func BenchmarkGemm(b *testing.B) {
	for _, bc := range []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{{"NN64x256x256", false, false, 64, 256, 256}, {"NT64x256x256", false, true, 64, 256, 256},
		{"TN256x256x64", true, false, 256, 256, 64}, {"NN64x256x4", false, false, 64, 256, 4}} {
		b.Run(bc.name, func(b *testing.B) {
			p := newProblem(rand.New(rand.NewPCG(1, 1)), bc.transA, bc.transB, bc.m, bc.n, bc.k, 1, 0, 0, false)
			b.SetBytes(int64(2 * bc.m * bc.n * bc.k)) // flops, read as MB/s = MFLOP/s
			for b.Loop() {
				if err := Gemm(p.transA, p.transB, p.m, p.n, p.k, 1, p.a, p.lda, p.b, p.ldb, 0, p.c, p.ldc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestImplementationSgemm: the BLAS method gives Gemm's result for each
// transpose, and a bad call panics as gonum's does.
func TestImplementationSgemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tr := range [][2]blas.Transpose{{blas.NoTrans, blas.NoTrans}, {blas.Trans, blas.NoTrans},
		{blas.NoTrans, blas.Trans}, {blas.ConjTrans, blas.Trans}} {
		p := newProblem(rng, tr[0] != blas.NoTrans, tr[1] != blas.NoTrans, 9, 21, 13, 1.5, 0.5, 1, false)
		want, err := p.run()
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(p.c)
		Implementation{}.Sgemm(tr[0], tr[1], p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, got, p.ldc)
		if !slices.Equal(got, want) {
			t.Fatalf("%c%c: Sgemm %v, Gemm %v", tr[0], tr[1], got, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a short A did not panic")
		}
	}()
	Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0,
		make([]float32, 4), 2)
}
