//go:build !amd64 || purego

package explog

import "github.com/trajring/trajring/internal/impl"

// This build has no vector loops: useAVX2 and useAVX512 stay false, and
// vector, vector8 and weights8 are their work in Go.
var useAVX2, useAVX512, useFMA bool

const hasAVX512 = false

func init() {
	impl.Register("explog", "avx2", false, func(on bool) { useAVX2 = on })
	impl.Register("explog", "avx512", false, func(on bool) { useAVX512 = on })
}

func vector(dst, xs []float64, y float64) int { return vectorGo(dst, xs, y) }

func vector8(dst, xs []float64, y float64) int { return vectorGo(dst, xs, y) }

func weights8(dst, xs []float64, d, y float64) int { return weights8Go(dst, xs, d, y) }
