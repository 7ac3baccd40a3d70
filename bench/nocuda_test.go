//go:build !cuda

package bench

const cudaBuild = false
