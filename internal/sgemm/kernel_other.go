//go:build !amd64 || purego

package sgemm

// useFMA and hasFMA are false: there is no assembly kernel.
var useFMA, hasFMA = false, false

// kernel is kernelGo.
func kernel(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	kernelGo(k, a, rsA, csA, bp, c, ldc, alpha, beta)
}
