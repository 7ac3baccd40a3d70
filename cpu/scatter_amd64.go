//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

func init() {
	impl.Register("cpu", "scatter-nt", cpu.X86.HasAVX, func(on bool) { scatterNT = on })
}

// ntCopy copies n bytes, a multiple of 64, from src to dst, 32-byte
// aligned, with non-temporal stores; sfence must follow before the
// bytes are published.
//
//go:noescape
func ntCopy(dst, src unsafe.Pointer, n int64)

// sfence orders the non-temporal stores before it before later stores.
func sfence()
