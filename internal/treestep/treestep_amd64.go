//go:build amd64 && !purego

package treestep

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects levelAVX2 (POPCNT comes with every AVX2 CPU, checked
// anyway).
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

// setAVX2 switches the assembly loop (tests).
func setAVX2(on bool) { useAVX2 = on && cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT }

// levelAVX2 is Level's loop over draws start..n-1 of a level of groups
// groups: a group's eight sums compared with the draw's mass in two
// 256-bit compares (unsigned, by flipping the sign bits), the count by
// POPCNT.
//
//go:noescape
func levelAVX2(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int
