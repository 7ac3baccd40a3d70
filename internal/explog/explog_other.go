//go:build !amd64 || purego

package explog

const useAVX2, useFMA = false, false

func setLevel(avx2, fma bool) {}

func vector(dst, xs []float64, y float64) int {
	panic("explog: vector loop without AVX2")
}
