//go:build !amd64 || purego

package philox

import "unsafe"

const hasAVX2 = false

func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	panic("philox: fill16 without AVX2")
}

func setAVX2(bool) {}
