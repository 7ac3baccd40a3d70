//go:build !amd64 || purego

package philox

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

// useAVX2 and useAVX512 stay false: this build has no vector loops, and
// fill16 and fill64 are Fill's Go loop in groups.
var useAVX2, useAVX512 bool

func init() {
	impl.Register("philox", "avx2", false, func(on bool) { useAVX2 = on })
	impl.Register("philox", "avx512", false, func(on bool) { useAVX512 = on })
}

func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	fillBlocks(dst, 8*n, x, stream, c0, c1, keys)
}

func fill64(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	fillBlocks(dst, 32*n, x, stream, c0, c1, keys)
}
