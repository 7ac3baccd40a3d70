// Package sumtree is the shape and the descent step of the 8-ary tree of
// running sums behind prioritized sampling: tensorbuf's host tree and the
// cpu backend's reference of the device tree (kernels.Tree lays the same
// levels out in one array) both size their levels with Parent and
// descend them with Child, so that host and device selection pick the
// same leaf for the same draw. The batched descent of a whole level,
// with its assembly, is internal/treestep.
package sumtree

import (
	"math"

	"github.com/trajring/trajring/internal/treestep"
)

// Fanout is the number of children of a node. Eight float64 child sums
// fill one 64-byte cache line, so a descent touches one line per level:
// 7 levels for a million leaves where a binary tree has 20.
const Fanout = treestep.Fanout

// Child unrolls its comparisons for eight.
const _ = uint(Fanout-8) + uint(8-Fanout)

// Parent returns the number of nodes of the level above a level of size
// nodes: one per group of Fanout, rounded up to whole groups (zero-padded)
// so that every level is a whole number of cache lines. A tree of n
// leaves (a power of two, at least Fanout) has levels of n, Parent(n),
// Parent(Parent(n)), ... nodes, up to the level of Fanout nodes, the
// root's children.
func Parent(size int) int {
	size = (size + Fanout - 1) / Fanout
	return (size + Fanout - 1) / Fanout * Fanout
}

// Child picks, in a group whose running sums are ps (non-decreasing), the
// node j whose range [ps[j-1], ps[j]) holds u (u >= 0; ps[-1] = 0), and
// returns it with u made relative to it. A node of sum 0 has an empty
// range, so it is never picked; when rounding puts u at or past the
// group's last running sum, ChildPast picks.
//
// The comparisons are made on the bits of the floats (for non-negative
// floats the order of the bits is the order of the values) and counted as
// integers, without a data-dependent branch; treestep.Level makes the
// same comparison for a batch of draws. It is safe for concurrent use.
func Child(ps *[Fanout]float64, u float64) (int, float64) {
	ub := math.Float64bits(u)
	j := b2i(ub >= math.Float64bits(ps[0])) + b2i(ub >= math.Float64bits(ps[1])) +
		b2i(ub >= math.Float64bits(ps[2])) + b2i(ub >= math.Float64bits(ps[3])) +
		b2i(ub >= math.Float64bits(ps[4])) + b2i(ub >= math.Float64bits(ps[5])) +
		b2i(ub >= math.Float64bits(ps[6])) + b2i(ub >= math.Float64bits(ps[7]))
	if j == Fanout {
		return ChildPast(ps, u)
	}
	// below = ps[j-1], or 0 for j = 0, without a branch.
	below := math.Float64frombits(math.Float64bits(ps[(j-1)&(Fanout-1)]) & -uint64(b2i(j > 0)))
	return j, u - below
}

// ChildPast is Child when rounding puts u at or past the group's last
// running sum: it picks the last node whose running sum rises (so of
// positive sum), whose subtree does the same, or node 0 in a group of
// sum 0. It is safe for concurrent use.
func ChildPast(ps *[Fanout]float64, u float64) (int, float64) {
	j := Fanout - 1
	for j > 0 && ps[j] <= ps[j-1] {
		j--
	}
	if j == 0 {
		return 0, u
	}
	return j, u - ps[j-1]
}

// b2i is 1 for true, 0 for false (a SETcc, no branch).
func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}
