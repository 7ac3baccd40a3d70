//go:build trajring_cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// hostAlloc returns n bytes of page-locked (pinned) host memory, which the
// device reads by DMA, so copies from it can run asynchronously.
// gorgonia.org/cu has no wrapper for cuMemHostAlloc.
func hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	switch r := C.cuMemHostAlloc(&p, C.size_t(n), 0); r {
	case C.CUDA_SUCCESS:
		return p, nil
	case C.CUDA_ERROR_OUT_OF_MEMORY:
		return nil, fmt.Errorf("%w: cuMemHostAlloc of %d pinned host bytes", ErrOutOfMemory, n)
	default:
		return nil, fmt.Errorf("%w: cuMemHostAlloc of %d bytes: CUresult %d", ErrDriver, n, int(r))
	}
}
