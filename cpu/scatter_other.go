//go:build !amd64 || purego

package cpu

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

func init() { impl.Register("cpu", "scatter-nt", false, func(on bool) { scatterNT = on }) }

// ntCopy is never called here: scatter-nt is not available.
func ntCopy(dst, src unsafe.Pointer, n int64) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

func sfence() {}
