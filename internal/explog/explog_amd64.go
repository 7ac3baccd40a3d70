//go:build amd64 && !purego

package explog

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the vector loop; useFMA selects its fused
// multiply-adds, which math.Exp uses under the same condition
// (math/exp_amd64.go).
var (
	useAVX2 = cpu.X86.HasAVX2
	useFMA  = cpu.X86.HasAVX && cpu.X86.HasFMA
)

// setLevel switches the vector loop and its fused multiply-adds (tests).
// fma must match math.Exp's choice for the results to be identical.
func setLevel(avx2, fma bool) { useAVX2, useFMA = avx2, fma }

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

//go:noescape
func expLogAVX2(dst, xs unsafe.Pointer, n int, y float64) int

//go:noescape
func expLogFMA(dst, xs unsafe.Pointer, n int, y float64) int
