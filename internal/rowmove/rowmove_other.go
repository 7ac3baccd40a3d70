//go:build !amd64 || purego

package rowmove

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

// This build has no assembly: Rows and Cols run their Go loop, and cols
// and rowsRep are that loop.
const enabled = false

var useAVX2, useRep bool

func init() {
	impl.Register("rowmove", "wide", false, func(on bool) { useAVX2 = on })
	impl.Register("rowmove", "rep", false, func(on bool) { useRep = on })
}

const repMin = 256

func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsGo(dst, src, idx, stride, size)
}

func cols(cs unsafe.Pointer, n int, idx []int64, first int64) {
	colsGo(unsafe.Slice((*Col)(cs), n), idx, first)
}

func rowsRep(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsGo(dst, src, idx, stride, size)
}

func rowsRepAhead(dst, src unsafe.Pointer, idx, pf []int64, stride, size int64, pfBase unsafe.Pointer, pfStride, pfSpan int64) {
	rowsAheadGo(dst, src, idx, pf, stride, size, Ahead{Base: pfBase, Stride: pfStride, Span: pfSpan})
}
