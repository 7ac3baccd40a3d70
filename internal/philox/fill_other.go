//go:build !amd64 || purego

package philox

import "unsafe"

const useAVX2, useAVX512 = false, false

func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	panic("philox: fill16 without AVX2")
}

func fill64(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	panic("philox: fill64 without AVX-512")
}

// setImpl reports whether Fill can run impl's loops: only the Go loop here.
func setImpl(impl int) bool { return impl == implGo }
