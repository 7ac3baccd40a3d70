//go:build !amd64 || purego

package explog

const useAVX512, useAVX2, useFMA, hasAVX512 = false, false, false, false

func setLevel(avx512, avx2, fma bool) {}

func vector(dst, xs []float64, y float64) int {
	panic("explog: vector loop without AVX2")
}

func weights8(dst, xs []float64, d, y float64) int {
	panic("explog: vector loop without AVX-512")
}

func vector8(dst, xs []float64, y float64) int {
	panic("explog: vector loop without AVX-512")
}
