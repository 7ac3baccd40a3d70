//go:build trajring_cuda

package gpu

import (
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// eventOf returns the cu.Event of a backend event.
func eventOf(e kernels.Event) cu.Event { return e.(*Event).ev }
