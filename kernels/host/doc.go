// Package host runs the host build of trajring's CUDA kernels: the same
// __host__ __device__ element functions and grid-stride loops that nvcc
// compiles to PTX, compiled here by cgo and launched on a simulated grid
// one thread after another, or, in race exposure (Mode, SetMode;
// TRAJRING_STANDIN_THREADS), in shuffled units on several host threads at
// once, so that kernels whose threads race or depend on each other's order
// fail. Its tests check every kernel byte for byte against the cpu
// backend's reference loops, in both modes.
//
// The package needs cgo; without it (CGO_ENABLED=0) it holds only this
// documentation, so pure-Go builds of ./... still succeed.
package host
