//go:build amd64 && !purego

package rowmove

import "unsafe"

const enabled = true

// rows is Rows for 4 <= size <= MaxSize: one column of cols (the
// assembly loop is written once).
func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	c := Col{Dst: dst, Src: src, Stride: stride, Size: size}
	cols(unsafe.Pointer(&c), 1, idx, 0)
}

// cols is Cols over n columns from cs.
//
//go:noescape
func cols(cs unsafe.Pointer, n int, idx []int64, first int64)
