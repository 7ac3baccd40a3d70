//go:build !amd64 || purego

package sgemm

// useFMA, hasFMA, useAVX512 and hasAVX512 are false: there is no
// assembly kernel.
var useFMA, hasFMA, useAVX512, hasAVX512 = false, false, false, false

// kernelPair is never called (useAVX512 is false).
func kernelPair(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	panic("sgemm: no 512-bit kernel")
}

// kernel is kernelGo.
func kernel(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	kernelGo(k, a, rsA, csA, bp, c, ldc, alpha, beta)
}

// packPanelT writes the panel of op(B) = B^T for columns [jr, jr+nr):
// dst[q*nr+j] = b[(jr+j)*ldb+q].
func packPanelT(dst, b []float32, ldb, k, jr int) { packPanelTGo(dst, b, ldb, k, jr, 0) }
