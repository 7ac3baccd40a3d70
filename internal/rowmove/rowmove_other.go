//go:build !amd64 || purego

package rowmove

import "unsafe"

const enabled = false

func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsGo(dst, src, idx, stride, size)
}
