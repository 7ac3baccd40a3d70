//go:build !amd64 || purego

package treestep

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

// levelAsm is nil: Level runs its Go loop.
var levelAsm = best()

func best() func(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	return nil
}

func init() {
	impl.Register("treestep", "avx2", false, func(bool) {})
	impl.Register("treestep", "avx512", false, func(bool) {})
}
