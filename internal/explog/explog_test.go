package explog

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/impl"
)

// same reports whether a and b are the same float64 bits, or both NaN.
func same(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

// edgeXs are inputs around every branch of Log and Exp: zeros,
// negatives, subnormals, the normal range's ends, infinities, NaN, 1 and
// its neighbours, powers of two and the split point sqrt(2)/2 (and its
// neighbours) at several exponents.
func edgeXs() []float64 {
	xs := []float64{
		0, math.Copysign(0, -1), -1, -math.SmallestNonzeroFloat64, -math.MaxFloat64,
		math.SmallestNonzeroFloat64, 0x1p-1023, math.Nextafter(0x1p-1022, 0),
		0x1p-1022, math.Nextafter(0x1p-1022, 1), math.MaxFloat64,
		math.Nextafter(math.MaxFloat64, 0), math.Inf(1), math.Inf(-1), math.NaN(),
		1, math.Nextafter(1, 2), math.Nextafter(1, 0), 2, 0.5, 3, 10, 1e300, 1e-300,
		math.Float64frombits(0x7FF0000000000001), math.Float64frombits(0xFFF8000000000000),
	}
	h := math.Float64frombits(0x3FE6A09E667F3BCD) // sqrt(2)/2 as log_amd64.s rounds it
	for _, e := range []int{-1021, -600, -52, -2, -1, 0, 1, 2, 3, 52, 600, 1023} {
		for _, v := range []float64{1, h, math.Sqrt2 / 2, 0.75} {
			x := math.Ldexp(v, e)
			xs = append(xs, x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
		}
	}
	return xs
}

// splitXs are sqrt(2)/2 (as log_amd64.s rounds it) times every power of
// two of the normal range: Log's reduction moves a fraction equal to it
// (math.Log(0x1p32*sqrt(2)/2) rounds differently if it does not).
var splitXs = func() []float64 {
	var xs []float64
	for e := -1021; e <= 1024; e++ {
		xs = append(xs, math.Ldexp(math.Float64frombits(0x3FE6A09E667F3BCD), e))
	}
	return xs
}()

// edgeYs are exponents including those that push y*Log(x) to Exp's
// overflow, subnormal and underflow ranges.
func edgeYs() []float64 {
	return []float64{0, math.Copysign(0, -1), 0.5, -0.5, 0.4, -0.4, 0.3, -0.3, 1e-300, -1e-300,
		1, -1, 2, -2, 1.5, 0.999, 1.001, -1.001, 1.0001, 2.5, -2.5, 3, -3, 10, -10, 1e300,
		-1e300, math.Inf(1), math.Inf(-1), math.NaN(), 0.25, 1.0 / 3, 0.1}
}

// logUniform returns a random positive normal float64, its exponent
// uniform over the normal range.
func logUniform(rng *rand.Rand) float64 {
	return math.Float64frombits(uint64(1+rng.IntN(2046))<<52 | rng.Uint64()&(1<<52-1))
}

// mathFMA is whether math.Exp uses fused multiply-adds here: Exp(0.5 *
// Log(0.5)) rounds differently with and without them.
var mathFMA = func() bool {
	v := 0.5 * math.Log(0.5)
	return same(math.Exp(v), refExp(v, true))
}()

// levels are the vector settings to test: each with the reference whose
// arithmetic it must reproduce (math's own where it matches math.Exp's
// FMA choice, else refExp with the other choice).
type level struct {
	avx512, avx2, fma bool
}

func levels() []level {
	ls := []level{{fma: mathFMA}}
	if useAVX2 {
		ls = append(ls, level{avx2: true}, level{avx2: true, fma: true})
	}
	if hasAVX512 {
		// The eight-lane loop, and four at a time for a group of eight
		// it cannot compute: the four-lane model of want holds.
		ls = append(ls, level{avx512: true, avx2: true, fma: true})
	}
	return ls
}

// straight reports whether Log(x) and Exp(y*Log(x)) both take their
// straight-line paths (no special case, no overflow or subnormal result).
func straight(x, y float64) bool {
	k := math.RoundToEven(y * math.Log(x) * (1 / math.Ln2))
	return x >= 0x1p-1022 && x <= math.MaxFloat64 && k >= -1022 && k <= 1023
}

// want is the reference for xs[i] at a level: where the vector loop
// computes the group of four of xs[i] (all its lanes straight), refExp
// with the level's choice of fused operations, else math itself.
func want(xs []float64, i int, y float64, l level) float64 {
	v := y * math.Log(xs[i])
	if g := i &^ 3; l.avx2 && g+4 <= len(xs) &&
		straight(xs[g], y) && straight(xs[g+1], y) && straight(xs[g+2], y) && straight(xs[g+3], y) {
		return refExp(v, l.fma)
	}
	return math.Exp(v)
}

func check(t *testing.T, l level, xs []float64, y float64) {
	t.Helper()
	dst := make([]float64, len(xs)+1)
	dst[len(xs)] = 12345
	ExpScaledLog(dst[:len(xs)], xs, y)
	if dst[len(xs)] != 12345 {
		t.Fatalf("%+v: wrote past dst", l)
	}
	for i, x := range xs {
		if w := want(xs, i, y, l); !same(dst[i], w) {
			t.Fatalf("%+v: Exp(%v*Log(%v)) [x=%#x] = %v (%#x), want %v (%#x)",
				l, y, x, math.Float64bits(x), dst[i], math.Float64bits(dst[i]), w, math.Float64bits(w))
		}
	}
}

func withLevel(l level, f func()) {
	a, b, c := useAVX512, useAVX2, useFMA
	setLevel(l.avx512, l.avx2, l.fma)
	defer setLevel(a, b, c)
	f()
}

// TestRefExp checks the test's reference exponential against math.Exp
// with the machine's own choice of fused operations.
func TestRefExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := (rng.Float64()*2 - 1) * 750
		if w, r := math.Exp(v), refExp(v, mathFMA); !same(w, r) {
			t.Fatalf("refExp(%v) = %v, math.Exp %v", v, r, w)
		}
	}
}

// TestEdges checks every edge x against every edge y, at every offset in
// groups of four and of eight (alone and among ordinary values), and
// lengths 0..17.
func TestEdges(t *testing.T) {
	xs, ys := edgeXs(), edgeYs()
	for _, l := range levels() {
		withLevel(l, func() {
			for _, y := range ys {
				check(t, l, xs, y)
				for _, x := range xs {
					for pos := range 8 {
						g := []float64{1.5, 3e10, 0.75, 7e-200, 2.5, 1e5, 0.3, 9e100}
						g[pos] = x
						check(t, l, g, y)
						check(t, l, g[:4], y)
					}
				}
				check(t, l, splitXs, y)
				for n := range 18 {
					check(t, l, xs[:n], y)
					check(t, l, xs[len(xs)-n:], y)
				}
			}
		})
	}
}

// TestRandom checks millions of log-uniform x (and x near 1) against
// many y in [-0.5, 0.5] and beyond.
func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 1 << 20
	if testing.Short() || raceDetector {
		n = 1 << 16
	}
	xs := make([]float64, n)
	for i := range xs {
		switch i % 4 {
		case 3:
			xs[i] = 1 + (rng.Float64()-0.5)*math.Ldexp(1, -rng.IntN(53))
		case 2:
			xs[i] = 1 + rng.Float64()*1e6
		default:
			xs[i] = logUniform(rng)
		}
	}
	ys := []float64{0.4, -0.4, 0.5, -0.5, 0.3, -0.3, 0.1, -0.1, 1e-3, 3}
	for range 10 {
		ys = append(ys, rng.Float64()-0.5)
	}
	for _, l := range levels() {
		withLevel(l, func() {
			for _, y := range ys {
				check(t, l, xs, y)
			}
		})
	}
}

// refExp is math.Exp's amd64 assembly written out in Go (explicit
// conversions keep the compiler from fusing what the assembly does not),
// with or without its fused multiply-adds.
func refExp(x float64, fma bool) float64 {
	const (
		log2e = 1.4426950408889634073599246810018920
		ln2U  = 0.69314718055966295651160180568695068359375
		ln2L  = 0.28235290563031577122588448175013436025525412068e-12
		ovf   = 7.09782712893384e+02
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case math.IsInf(x, -1):
		return 0
	case x > ovf:
		return math.Inf(1)
	}
	k := int32(math.RoundToEven(float64(log2e * x)))
	if r := math.RoundToEven(float64(log2e * x)); r != float64(k) {
		k = math.MinInt32 // the conversion's integer indefinite
	}
	kf := float64(k)
	c := [...]float64{1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1}
	var p float64
	if fma {
		x = math.FMA(-kf, ln2U, x)
		x = math.FMA(-kf, ln2L, x)
		x *= 0.0625
		p = c[0]
		for _, ci := range c[1:] {
			p = math.FMA(x, p, ci)
		}
		x *= p
		for range 3 {
			x = float64(x * float64(x+2))
		}
		x = math.FMA(x+2, x, 1)
	} else {
		x = float64(x - float64(kf*ln2U))
		x = float64(x - float64(kf*ln2L))
		x *= 0.0625
		p = c[0]
		for _, ci := range c[1:] {
			p = float64(float64(p*x) + ci)
		}
		x *= p
		for range 4 {
			x = float64(x * float64(x+2))
		}
		x++
	}
	e := int64(k) + 0x3FF
	switch {
	case e >= 0x7FF:
		return math.Inf(1)
	case e <= 0:
		if e < -52 {
			return 0
		}
		x *= math.Float64frombits(uint64(e+0x3FE) << 52)
		e = 1
	}
	return x * math.Float64frombits(uint64(e)<<52)
}

func TestLengthMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	ExpScaledLog(make([]float64, 3), make([]float64, 4), 0.5)
}

func TestInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := make([]float64, 37)
	for i := range xs {
		xs[i] = logUniform(rng)
	}
	xs[5] = -1
	d := append([]float64(nil), xs...)
	ExpScaledLog(d, d, 0.3)
	for i, x := range xs {
		if w := math.Exp(0.3 * math.Log(x)); !same(d[i], w) {
			t.Fatalf("in place [%d] = %v, want %v", i, d[i], w)
		}
	}
}

var sink float64

func benchmark(b *testing.B, n int, f func(dst, xs []float64, y float64)) {
	rng := rand.New(rand.NewPCG(7, 8))
	xs, dst := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = 1 + rng.Float64()*1e6 // importance ratios w/wMin
	}
	b.SetBytes(int64(8 * n))
	for b.Loop() {
		f(dst, xs, -0.4)
	}
	sink = dst[n-1]
}

// benchImpls runs f as a sub-benchmark per loop of the package (go: the
// math package's loop; avx2: the four-lane loop; avx512: the eight-lane
// loops), switched through internal/impl, with each size in ns.
func benchImpls(b *testing.B, ns []int, f func(dst, xs []float64, y float64)) {
	defer impl.Reset("explog")
	for _, n := range ns {
		for _, name := range []string{"go", "avx2", "avx512"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
				sel := name
				if sel == "go" {
					sel = ""
				}
				if !impl.Select("explog", sel) {
					b.Skipf("this CPU or build lacks %s", name)
				}
				benchmark(b, n, f)
			})
		}
	}
}

// BenchmarkExpScaledLog times ExpScaledLog with each loop, in one binary:
//
//	go test -run '^$' -bench 'ExpScaledLog|Weights' -count 5 ./internal/explog/
func BenchmarkExpScaledLog(b *testing.B) { benchImpls(b, []int{256, 65536}, ExpScaledLog) }

// BenchmarkWeights times Weights over the same values (d = 1) with each
// loop: with avx512 the ratios and reciprocals run in the vector loop
// too (weightsAVX512); avx512-exp is what Weights would run without it
// (weights: ExpScaledLog's eight-lane loop, the ratios and reciprocals
// in Go).
func BenchmarkWeights(b *testing.B) {
	const n = 256
	benchImpls(b, []int{n}, func(dst, xs []float64, y float64) { Weights(dst, xs, 1, y, weightRef(1, y)) })
	b.Run(fmt.Sprintf("n=%d/avx512-exp", n), func(b *testing.B) {
		defer impl.Reset("explog")
		if !impl.Select("explog", "avx512") {
			b.Skip("this CPU or build lacks avx512")
		}
		benchmark(b, n, func(dst, xs []float64, y float64) { weights(dst, xs, 1, y, weightRef(1, y)) })
	})
}

// weightRef is the expression Weights computes where x/d is a positive
// normal number, and elsewhere a value no weight takes (-1000-x), so a
// test sees whether slow was called.
func weightRef(d, y float64) func(x float64) float64 {
	return func(x float64) float64 {
		if r := x / d; r >= 0x1p-1022 && r <= math.MaxFloat64 {
			return min(1, 1/math.Exp(y*math.Log(r)))
		}
		return -1000 - x
	}
}

func checkWeights(t *testing.T, l level, xs []float64, d, y float64) {
	t.Helper()
	ref := weightRef(d, y)
	dst := make([]float64, len(xs)+1)
	dst[len(xs)] = 12345
	Weights(dst[:len(xs)], xs, d, y, ref)
	if dst[len(xs)] != 12345 {
		t.Fatalf("%+v: wrote past dst", l)
	}
	for i, x := range xs {
		if w := ref(x); !same(dst[i], w) {
			t.Fatalf("%+v: weight of %v over %v at y %v [x=%#x] = %v (%#x), want %v (%#x)",
				l, x, d, y, math.Float64bits(x), dst[i], math.Float64bits(dst[i]), w, math.Float64bits(w))
		}
	}
}

// TestWeights checks Weights at every level against its expression:
// every edge x over several d (so that ratios overflow, underflow and
// land on 1) at every offset in groups of eight among ordinary values,
// lengths 0..17, and many random ratios.
func TestWeights(t *testing.T) {
	xs, ys := edgeXs(), edgeYs()
	ds := []float64{1, 0.5, 3, 1e-300, math.SmallestNonzeroFloat64, 1e300, 0x1p-1022}
	rng := rand.New(rand.NewPCG(9, 10))
	random := make([]float64, 1<<12)
	for i := range random {
		random[i] = 1 + rng.Float64()*math.Ldexp(1, rng.IntN(40))
	}
	for _, l := range levels() {
		if l.fma != mathFMA {
			continue // Weights' contract is math's own Exp
		}
		withLevel(l, func() {
			for _, y := range ys {
				for _, d := range ds {
					checkWeights(t, l, xs, d, y)
					for _, x := range xs {
						for pos := range 8 {
							g := []float64{1.5, 3e10, 0.75, 7e-200, 2.5, 1e5, 0.3, 9e100, 4, 1}
							g[pos] = x
							checkWeights(t, l, g, d, y)
							checkWeights(t, l, g[:8], d, y)
						}
					}
					for n := range 18 {
						checkWeights(t, l, xs[:n], d, y)
						checkWeights(t, l, xs[len(xs)-n:], d, y)
					}
				}
			}
			for _, y := range []float64{0.4, -0.4, 0.5, -0.5, 0.1, 1e-3} {
				checkWeights(t, l, random, 1, y)
				checkWeights(t, l, random, 0.75, y)
			}
		})
	}
}
