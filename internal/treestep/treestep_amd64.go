//go:build amd64 && !purego

package treestep

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The assembly loops this CPU can run (POPCNT comes with every AVX2 CPU,
// checked anyway).
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F
)

// levelAsm is the loop Level runs: the widest the CPU has (tests switch
// it with setImpl).
var levelAsm = best()

func best() func(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	switch {
	case hasAVX512:
		return levelAVX512
	case hasAVX2:
		return levelAVX2
	}
	return nil
}

// setImpl makes Level run impl (implGo, implAVX2 or implAVX512) and
// reports whether the CPU can; where it cannot, Level is left as it was.
func setImpl(impl int) bool {
	switch {
	case impl == implGo:
		levelAsm = nil
	case impl == implAVX2 && hasAVX2:
		levelAsm = levelAVX2
	case impl == implAVX512 && hasAVX512:
		levelAsm = levelAVX512
	default:
		return false
	}
	return true
}

// levelAVX2 is Level's loop over draws start..n-1 of a level of groups
// groups: a group's eight sums compared with the draw's mass in two
// 256-bit compares (unsigned, by flipping the sign bits), the count by
// POPCNT.
//
//go:noescape
func levelAVX2(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int

// levelAVX512 is levelAVX2 with one 512-bit unsigned compare into a mask
// register (AVX-512F), the count by POPCNT.
//
//go:noescape
func levelAVX512(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int
