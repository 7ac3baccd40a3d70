// Package explog computes math.Exp(y*math.Log(x)) for a slice of x and
// one y, bit for bit as the math package does, eight or four values at a
// time where the machine allows.
//
// On amd64 with AVX2, math.Exp and math.Log are straight-line assembly
// whose every operation is an IEEE-754 add, subtract, multiply, divide or
// fused multiply-add (the last where math.Exp itself uses them: AVX and
// FMA present). The vector loop performs the same operations in the same
// order on four lanes, so each lane rounds exactly as the scalar code
// does. Lanes whose x or y*Log(x) would take one of the functions'
// special branches (x not a positive normal finite number; a result that
// overflows, is subnormal or not finite) are computed by the math
// package itself: the whole group of four that holds one. With AVX-512
// (and FMA, which every such CPU has) the loop runs eight lanes at a
// time, the same operations again; a group of eight it cannot compute is
// done four at a time.
//
// The vector loops exist for speed alone: BenchmarkExpScaledLog and
// BenchmarkWeights run each of them and the math package's loop in one
// binary.
package explog

import (
	"math"

	"github.com/trajring/trajring/internal/impl"
)

// ExpScaledLog sets dst[i] = math.Exp(y*math.Log(xs[i])) for every i,
// with results identical bit for bit to that loop:
//
//	for i, x := range xs {
//		dst[i] = math.Exp(y * math.Log(x))
//	}
//
// It panics if len(dst) != len(xs). dst and xs may be the same slice but
// must not otherwise overlap. It is safe for concurrent use on distinct
// slices.
func ExpScaledLog(dst, xs []float64, y float64) {
	if len(dst) != len(xs) {
		panic("explog: slices of different lengths")
	}
	if !useAVX512 {
		by4(dst, xs, y)
		return
	}
	// A group of eight the loop cannot compute is done four at a time.
	inGroups(dst, xs, 8,
		func(dst, xs []float64) int { return vector8(dst, xs, y) },
		func(dst, xs []float64) { by4(dst, xs, y) })
}

// by4 is ExpScaledLog four at a time where the CPU has AVX2; a group of
// four the vector loop cannot compute is done one value at a time.
func by4(dst, xs []float64, y float64) {
	if !useAVX2 {
		scalar(dst, xs, y)
		return
	}
	inGroups(dst, xs, 4,
		func(dst, xs []float64) int { return vector(dst, xs, y) },
		func(dst, xs []float64) { scalar(dst, xs, y) })
}

// inGroups runs a vector loop over dst and xs, w values at a time (w a
// power of two): vec computes groups from the start of what it is given
// until one it cannot compute and returns how many values it did; rest
// does that group, and the values past the last whole group.
func inGroups(dst, xs []float64, w int, vec func(dst, xs []float64) int, rest func(dst, xs []float64)) {
	i := 0
	for n := len(dst) &^ (w - 1); i < n; i += w {
		if i += vec(dst[i:n], xs[i:n]); i == n {
			break
		}
		rest(dst[i:i+w], xs[i:i+w])
	}
	if i < len(dst) {
		rest(dst[i:], xs[i:])
	}
}

// Weights sets dst[i] = slow(xs[i]) for every i, computing it without a
// call where it can: slow must return
//
//	min(1, 1/math.Exp(y*math.Log(x/d)))
//
// for every x for which x/d is a positive normal float64 (it may return
// anything elsewhere). That is prioritized replay's importance weight
// (x/d)^-y, at most 1, of a weight x over the smallest weight d, for an
// exponent y whose integer part is 0. With AVX-512 the ratios, Exp, Log
// and the reciprocals run eight lanes at a time, bit for bit as that
// expression; a group of eight with a lane off the straight path (see the
// package doc) is done by the loop below. Elsewhere the loop is:
//
//	for i, x := range xs {
//		if r := x / d; r >= 0x1p-1022 && r <= math.MaxFloat64 {
//			dst[i] = min(1, 1/math.Exp(y*math.Log(r)))
//		} else {
//			dst[i] = slow(x)
//		}
//	}
//
// with the Exp and Log of ExpScaledLog. It panics if len(dst) !=
// len(xs); dst and xs must not overlap. It is safe for concurrent use on
// distinct slices.
func Weights(dst, xs []float64, d, y float64, slow func(x float64) float64) {
	if len(dst) != len(xs) {
		panic("explog: slices of different lengths")
	}
	if !useAVX512 {
		weights(dst, xs, d, y, slow)
		return
	}
	inGroups(dst, xs, 8,
		func(dst, xs []float64) int { return weights8(dst, xs, d, y) },
		func(dst, xs []float64) { weights(dst, xs, d, y, slow) })
}

// weights is Weights' loop, with the ratios' Exp and Log by ExpScaledLog
// and, when every ratio is a positive normal number (the common case), no
// check per lane after it.
func weights(dst, xs []float64, d, y float64, slow func(x float64) float64) {
	plain := true
	for i, x := range xs {
		dst[i] = x / d
		plain = plain && normal(dst[i])
	}
	ExpScaledLog(dst, dst, y)
	for i, a := range dst {
		if plain || normal(xs[i]/d) {
			dst[i] = min(1, 1/a)
		} else {
			dst[i] = slow(xs[i])
		}
	}
}

// normal reports whether r is a positive normal float64.
func normal(r float64) bool { return r >= 0x1p-1022 && r <= math.MaxFloat64 }

// setLevel switches the vector loops (internal/impl) and their fused
// multiply-adds (tests); avx512 needs avx2 and fma, and the CPU's support
// for it. fma must match math.Exp's choice for the results to be
// identical.
func setLevel(avx512, avx2, fma bool) {
	useFMA = fma
	impl.Set("explog", "avx2", avx2)
	impl.Set("explog", "avx512", avx512 && avx2 && fma)
}

// vectorGo is the vector loops' work in Go (vector and vector8 where
// there is no assembly): it computes every group exactly, so it does
// them all and returns len(dst).
func vectorGo(dst, xs []float64, y float64) int {
	scalar(dst, xs, y)
	return len(dst)
}

// weights8Go is weights8's work in Go: groups of eight whose ratios are
// all positive normal numbers, up to the first that is not, whose index
// it returns (len(dst) when there is none), leaving it unwritten.
func weights8Go(dst, xs []float64, d, y float64) int {
	for g := 0; g+8 <= len(dst); g += 8 {
		for _, x := range xs[g : g+8] {
			if !normal(x / d) {
				return g
			}
		}
		for i := g; i < g+8; i++ {
			dst[i] = min(1, 1/math.Exp(y*math.Log(xs[i]/d)))
		}
	}
	return len(dst)
}

// scalar is the reference loop.
func scalar(dst, xs []float64, y float64) {
	xs = xs[:len(dst)]
	for i, x := range xs {
		dst[i] = math.Exp(y * math.Log(x))
	}
}
