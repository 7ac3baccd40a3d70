//go:build amd64 && !purego

package rowmove

import "unsafe"

const enabled = true

// rows is Rows for 4 <= size <= MaxSize.
//
//go:noescape
func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64)

// cols is Cols over n columns from cs.
//
//go:noescape
func cols(cs unsafe.Pointer, n int, idx []int64, first int64)
