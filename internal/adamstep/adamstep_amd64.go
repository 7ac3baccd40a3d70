//go:build amd64 && !purego

package adamstep

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX selects the vector loop; tests switch it off to compare.
var useAVX = hasAVX

// hasAVX is whether the CPU has the 256-bit float instructions the
// vector loop uses (AVX alone: no FMA, no AVX2 integer ops).
var hasAVX = cpu.X86.HasAVX

// useAVX512 selects the 16-lane loop (tests switch it); hasAVX512 is
// whether the CPU and OS can run it.
var (
	hasAVX512 = hasAVX && cpu.X86.HasAVX512F
	useAVX512 = hasAVX512
)

// vector runs the vector loops over the longest multiple of 8 of len(w)
// elements and returns how many it did.
func vector(w, g, m, v []float32, c *Coeffs) int {
	if n := len(w) &^ 15; useAVX512 && n > 0 {
		stepAVX512(unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(g)),
			unsafe.Pointer(unsafe.SliceData(m)), unsafe.Pointer(unsafe.SliceData(v)), n, c)
		return n + vector8(w[n:], g[n:], m[n:], v[n:], c)
	}
	return vector8(w, g, m, v, c)
}

// vector8 is vector with the 8-lane loop alone.
func vector8(w, g, m, v []float32, c *Coeffs) int {
	n := len(w) &^ 7
	if !useAVX || n == 0 {
		return 0
	}
	stepAVX(unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(g)),
		unsafe.Pointer(unsafe.SliceData(m)), unsafe.Pointer(unsafe.SliceData(v)), n, c)
	return n
}

// stepAVX is scalar over n (a positive multiple of 8) elements, eight at
// a time.
//
//go:noescape
func stepAVX(w, grad, m, v unsafe.Pointer, n int, c *Coeffs)

// stepAVX512 is stepAVX sixteen at a time (n a positive multiple of 16).
//
//go:noescape
func stepAVX512(w, grad, m, v unsafe.Pointer, n int, c *Coeffs)
