//go:build !trajring_cuda

package tensorbuf

import "github.com/trajring/trajring/cpu"

// DefaultBackend returns the backend a Buffer uses when its Config names
// none: the pure-Go cpu backend in default builds, the CUDA backend in
// builds tagged cuda.
func DefaultBackend() (Backend, error) { return cpu.New(), nil }
