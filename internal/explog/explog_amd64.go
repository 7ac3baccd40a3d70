//go:build amd64 && !purego

package explog

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the four-lane loop; useFMA selects its fused
// multiply-adds, which math.Exp uses under the same condition
// (math/exp_amd64.go); useAVX512 selects the eight-lane loop, which has
// only the fused form (every AVX-512 CPU has FMA).
var (
	useAVX2   = cpu.X86.HasAVX2
	useFMA    = cpu.X86.HasAVX && cpu.X86.HasFMA
	useAVX512 = hasAVX512
)

// hasAVX512 is whether the CPU can run the eight-lane loop.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX2 && cpu.X86.HasAVX && cpu.X86.HasFMA

// setLevel switches the vector loops and their fused multiply-adds
// (tests); avx512 needs avx2 and fma, and the CPU's support for it. fma
// must match math.Exp's choice for the results to be identical.
func setLevel(avx512, avx2, fma bool) {
	useAVX512, useAVX2, useFMA = avx512 && avx2 && fma && hasAVX512, avx2, fma
}

// vector computes dst[i] = Exp(y*Log(xs[i])) for len(dst) (a multiple of
// 4, equal to len(xs)) values, four at a time, until a group of four
// holds a lane it cannot compute exactly; it returns the number of values
// done (that group's index) and leaves the group unwritten.
func vector(dst, xs []float64, y float64) int {
	p, q := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(xs))
	if useFMA {
		return expLogFMA(p, q, len(dst), y)
	}
	return expLogAVX2(p, q, len(dst), y)
}

// vector8 is vector eight at a time (len(dst) a multiple of 8), with
// AVX-512.
func vector8(dst, xs []float64, y float64) int {
	return expLogAVX512(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(xs)), len(dst), y)
}

//go:noescape
func expLogAVX2(dst, xs unsafe.Pointer, n int, y float64) int

//go:noescape
func expLogFMA(dst, xs unsafe.Pointer, n int, y float64) int

// weights8 is Weights' vector loop, eight at a time (len(dst) a
// multiple of 8), with AVX-512: it stops at the first group of eight with
// a lane off the straight path, returns its index and leaves it unwritten.
func weights8(dst, xs []float64, d, y float64) int {
	return weightsAVX512(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(xs)), len(dst), d, y)
}

//go:noescape
func weightsAVX512(dst, xs unsafe.Pointer, n int, d, y float64) int

//go:noescape
func expLogAVX512(dst, xs unsafe.Pointer, n int, y float64) int
