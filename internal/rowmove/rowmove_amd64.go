//go:build amd64 && !purego

package rowmove

import "unsafe"

const enabled = true

// rows is Rows for 4 <= size <= MaxSize.
//
//go:noescape
func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64)
