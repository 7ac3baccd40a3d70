//go:build amd64 && !purego

package explog

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

// useAVX2 selects the four-lane loop and useAVX512 the eight-lane loop,
// the widest the CPU has unless a test selects others (internal/impl);
// useFMA selects the four-lane loop's fused multiply-adds, which math.Exp
// uses under the same condition (math/exp_amd64.go); the eight-lane loop
// has only the fused form (every AVX-512 CPU has FMA).
var (
	useAVX2, useAVX512 bool
	useFMA             = cpu.X86.HasAVX && cpu.X86.HasFMA
)

// hasAVX512 is whether the CPU can run the eight-lane loop.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX2 && cpu.X86.HasAVX && cpu.X86.HasFMA

func init() {
	impl.Register("explog", "avx2", cpu.X86.HasAVX2, func(on bool) { useAVX2 = on })
	impl.Register("explog", "avx512", hasAVX512, func(on bool) { useAVX512 = on })
}

// vector computes dst[i] = Exp(y*Log(xs[i])) for len(dst) (a multiple of
// 4, equal to len(xs)) values, four at a time, until a group of four
// holds a lane it cannot compute exactly; it returns the number of values
// done (that group's index) and leaves the group unwritten.
// BenchmarkExpScaledLog shows its win over the math package's loop (avx2
// against go).
func vector(dst, xs []float64, y float64) int {
	p, q := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(xs))
	if useFMA {
		return expLogFMA(p, q, len(dst), y)
	}
	return expLogAVX2(p, q, len(dst), y)
}

// vector8 is vector eight at a time (len(dst) a multiple of 8), with
// AVX-512. BenchmarkExpScaledLog shows its win over vector (avx512
// against avx2).
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
// BenchmarkWeights shows its win over ExpScaledLog's eight-lane loop with
// the ratios and reciprocals in Go (avx512 against avx512-exp).
func weights8(dst, xs []float64, d, y float64) int {
	return weightsAVX512(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(xs)), len(dst), d, y)
}

// weightsAVX512 is weights8's loop (see weights8 and BenchmarkWeights).
//
//go:noescape
func weightsAVX512(dst, xs unsafe.Pointer, n int, d, y float64) int

//go:noescape
func expLogAVX512(dst, xs unsafe.Pointer, n int, y float64) int
