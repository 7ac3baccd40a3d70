//go:build amd64 && !purego

package treestep

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

// The assembly loops this CPU can run (POPCNT comes with every AVX2 CPU,
// checked anyway).
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F
)

// levelAsm is the loop Level runs: the widest the CPU has unless a test
// selects another (internal/impl, through setImpl).
var levelAsm = best()

// on is which loops internal/impl has switched on.
var on struct{ avx2, avx512 bool }

func init() {
	impl.Register("treestep", "avx2", hasAVX2, func(v bool) { on.avx2 = v; levelAsm = chosen() })
	impl.Register("treestep", "avx512", hasAVX512, func(v bool) { on.avx512 = v; levelAsm = chosen() })
}

// best returns the widest loop the CPU has.
func best() func(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	switch {
	case hasAVX512:
		return levelAVX512
	case hasAVX2:
		return levelAVX2
	}
	return nil
}

// chosen returns the widest loop switched on.
func chosen() func(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	switch {
	case on.avx512:
		return levelAVX512
	case on.avx2:
		return levelAVX2
	}
	return nil
}

// levelAVX2 is Level's loop over draws start..n-1 of a level of groups
// groups: a group's eight sums compared with the draw's mass in two
// 256-bit compares (unsigned, by flipping the sign bits), the count by
// POPCNT. BenchmarkLevel shows its win over levelGo (avx2 against go).
//
//go:noescape
func levelAVX2(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int

// levelAVX512 is levelAVX2 with one 512-bit unsigned compare into a mask
// register (AVX-512F), the count by POPCNT. BenchmarkLevel shows its win
// over levelAVX2.
//
//go:noescape
func levelAVX512(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int
