//go:build trajring_cuda

package tensorbuf

import (
	"fmt"
	"sync"

	"github.com/trajring/trajring/gpu"
)

var (
	gpuOnce    sync.Once
	gpuBackend *gpu.Backend
	gpuErr     error
)

// DefaultBackend returns the backend a Buffer uses when its Config names
// none: the pure-Go cpu backend in default builds, the CUDA backend in
// builds tagged cuda. In cuda builds one gpu backend is started on first
// use and shared by the whole process; an error starting it (no device,
// no driver) is returned by every call. It is safe for concurrent use.
func DefaultBackend() (Backend, error) {
	gpuOnce.Do(func() {
		gpuBackend, gpuErr = gpu.New()
		if gpuErr != nil {
			gpuErr = fmt.Errorf("%w: starting the gpu backend: %w", ErrBackend, gpuErr)
		}
	})
	if gpuErr != nil {
		return nil, gpuErr
	}
	return gpuBackend, nil
}

var _ ItemSelector = (*gpu.Backend)(nil)
