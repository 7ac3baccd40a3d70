//go:build !trajring_cuda

package bench

const cudaBuild = false
