// Package treestep moves a batch of draws down one level of an 8-ary tree
// of running sums (the sum tree of tensorbuf's prioritized tables): the
// inner loop of a batched descent, in assembly where the CPU has AVX-512
// or AVX2 and in Go elsewhere, with identical results. The assembly
// exists for speed alone: BenchmarkLevel runs each loop in one binary.
package treestep

import (
	"math"
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

// Fanout is the number of running sums in a group: one 64-byte line.
const Fanout = 8

// Level moves draws start, start+1, ... one level down: draw d is in
// group out[d] of level (Fanout running sums per group, as float64 bits,
// non-decreasing in each group as running sums of non-negative weights
// are; the AVX-512 loop relies on it),
// with remaining mass us[d]. It stops at the first draw whose group does
// not exist (out[d] < 0 or past the level) or whose mass is at or past
// the group's last sum (rounding), and returns its index, leaving it as
// it was; it returns len(out) when every draw moved. The reference loop:
//
//	for d := start; d < len(out); d++ {
//		ps := level[Fanout*out[d]:][:Fanout]
//		j := 0 // the sums at or below us[d], compared as unsigned bits
//		for _, p := range ps {
//			if math.Float64bits(us[d]) >= p {
//				j++
//			}
//		}
//		if j == Fanout {
//			return d
//		}
//		if j > 0 {
//			us[d] -= math.Float64frombits(ps[j-1])
//		}
//		out[d] = Fanout*out[d] + int32(j)
//	}
//	return len(out)
//
// len(us) must be at least len(out). The AVX-512 loop addresses the 8
// bytes before a draw's group when its mass is below the group's first
// sum, in a masked-out load (no value read, no fault). It is safe for
// concurrent use on distinct us and out.
func Level(level []uint64, us []float64, out []int32, start int) int {
	us = us[:len(out)]
	if start < 0 || start >= len(out) {
		return max(start, len(out))
	}
	if levelAsm != nil {
		return levelAsm(unsafe.Pointer(unsafe.SliceData(level)), len(level)/Fanout,
			unsafe.Pointer(unsafe.SliceData(us)), unsafe.Pointer(unsafe.SliceData(out)), start, len(out))
	}
	return levelGo(level, us, out, start)
}

// levelGo is Level in Go. The sums are compared as integers loaded
// straight from memory and the count formed without branches (SETcc):
// the descents of independent draws overlap instead of waiting on
// mispredicted branches.
func levelGo(level []uint64, us []float64, out []int32, start int) int {
	groups := len(level) / Fanout
	for d := start; d < len(out); d++ {
		g := out[d]
		if g < 0 || int(g) >= groups {
			return d
		}
		ps := (*[Fanout]uint64)(level[int(g)*Fanout:])
		ub := math.Float64bits(us[d])
		j := b2i(ub >= ps[0]) + b2i(ub >= ps[1]) + b2i(ub >= ps[2]) + b2i(ub >= ps[3]) +
			b2i(ub >= ps[4]) + b2i(ub >= ps[5]) + b2i(ub >= ps[6]) + b2i(ub >= ps[7])
		if j == Fanout {
			return d
		}
		// Less the sum before j, or +0 (u - 0 is u) for j = 0, without a branch.
		us[d] -= math.Float64frombits(ps[(j-1)&(Fanout-1)] & -uint64(b2i(j > 0)))
		out[d] = g*Fanout + int32(j)
	}
	return len(out)
}

// The loops setImpl can select.
const (
	implGo = iota
	implAVX2
	implAVX512
)

// setImpl makes Level run impl through internal/impl and reports whether
// the CPU can; where it cannot, Level is left as it was.
func setImpl(im int) bool {
	return impl.Select("treestep", [...]string{implGo: "", implAVX2: "avx2", implAVX512: "avx512"}[im])
}

// b2i is 1 for true, 0 for false (a SETcc, no branch).
func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}
