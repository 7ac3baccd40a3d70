//go:build amd64 && !purego

package rowmove

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

const enabled = true

// useAVX2 makes cols move rows of 33 to 128 bytes as 32-byte words
// instead of 16-byte ones (read by the assembly; tests switch it).
// Measured same-run (B=256 L=1 low-dim sample from a cached 10k-step
// buffer, whose 68-byte observation is one such column; medians of 10
// alternating runs of two test binaries): 3.57 -> 3.35 µs. 64-byte words
// (AVX-512) measured the same as 32-byte ones.
var useAVX2 = cpu.X86.HasAVX2

// setWide switches the 32-byte loops (on only where the CPU has AVX2)
// and returns the previous setting.
func setWide(on bool) bool {
	was := useAVX2
	useAVX2 = on && cpu.X86.HasAVX2
	return was
}

// rows is Rows for 4 <= size <= MaxSize: one column of cols (the
// assembly loop is written once).
func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	c := Col{Dst: dst, Src: src, Stride: stride, Size: size}
	cols(unsafe.Pointer(&c), 1, idx, 0)
}

// cols is Cols over n columns from cs.
//
//go:noescape
func cols(cs unsafe.Pointer, n int, idx []int64, first int64)
