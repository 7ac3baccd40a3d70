//go:build !trajring_cuda

package main

const cudaBuild = false
