//go:build !cuda

package main

const cudaBuild = false
