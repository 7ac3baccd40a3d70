//go:build !amd64 || purego

package prefetch

import "unsafe"

const enabled = false

func rows(base unsafe.Pointer, idx []int64, stride, span int64) {}

func rows32(base unsafe.Pointer, idx []int32, stride int64) {}

func span(p unsafe.Pointer, n int64) {}
