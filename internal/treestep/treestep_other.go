//go:build !amd64 || purego

package treestep

import "unsafe"

const useAVX2 = false

func setAVX2(bool) {}

func levelAVX2(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	panic("treestep: levelAVX2 without AVX2")
}
