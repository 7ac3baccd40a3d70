//go:build trajring_cuda

package main

// cudaBuild: buffers live in device memory, and train -backend gpu runs the
// device learner.
const cudaBuild = true
