//go:build trajring_cuda

package main

// cudaBuild: buffers live in device memory and train is unavailable.
const cudaBuild = true
