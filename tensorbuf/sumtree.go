package tensorbuf

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/internal/fanout"
	"github.com/trajring/trajring/internal/prefetch"
	"github.com/trajring/trajring/internal/sumtree"
	"github.com/trajring/trajring/internal/treestep"
)

// treeFanout is the number of children of a sum-tree node
// (internal/sumtree: one 64-byte cache line of float64 sums).
const treeFanout = sumtree.Fanout

// sumTree keeps, over slots 0..n-1, a treeFanout-ary tree of sums and
// minima of non-negative weights, for prioritized sampling in O(log n):
// find gives the slot where a prefix sum crosses u, minPositive the
// smallest positive weight for normalising importance weights. Not safe
// for concurrent use.
//
// Level 0 is the leaves, level l+1 has one node per group of treeFanout
// nodes of level l, and the top level is a single group (the root's
// children). w holds the weights. sum[l] holds, for every group of level
// l, the running sums of its nodes' sums, left to right: sum[l][g*F+j] =
// s(g*F) + ... + s(g*F+j) (F = treeFanout), where s is a weight on level
// 0 and, above, a node's sum, the last running sum of its group one level
// down. A descent thus compares u with F running sums already formed, one
// aligned cache line per level, instead of adding them up. min[l] holds
// the minima of the nodes of level l (+Inf where no positive weight), the
// root's in min[len(min)-1][0]. Every level is a whole number of
// cache-line-aligned groups, zero-padded. Every running sum is recomputed
// from its group in order whenever one of its nodes changes (never
// updated by a difference), so the tree is a function of its weights
// alone: undoing a set restores it bit for bit.
type sumTree struct {
	n   int // leaf capacity, a power of two (0 before the first grow)
	w   []float64
	sum [][]float64
	min [][]float64
	job descent   // findMany's split; reused, so a split allocates nothing
	mem *treeMaps // the mappings of the large levels, if any (treeFloats)
}

// descent is findMany's work over a range of draws, split over the
// fanout workers.
type descent struct {
	t   *sumTree
	us  []float64
	out []int32
}

// Run descends draws lo..hi-1.
func (d *descent) Run(lo, hi int) { d.t.findRange(d.us[lo:hi], d.out[lo:hi]) }

// alignedFloats returns n zeroed float64s starting on a 64-byte
// boundary, with at least one float64 of the same allocation before them:
// treestep's AVX-512 loop addresses the 8 bytes before a level for a
// draw below its group's first sum (a masked load, whose value it does
// not use), so that address lies in the tree's own memory even where a
// masked-out load were not exempt from faults.
func alignedFloats(n int) []float64 {
	const line = 64 / 8
	b := make([]float64, n+2*line)
	off := line - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64/8) // 1..8
	return b[off : off+n : off+n]
}

func infs(n int) []float64 { return fillInf(alignedFloats(n)) }

// fillInf sets every element of m to +Inf and returns it.
func fillInf(m []float64) []float64 {
	for i := range m {
		m[i] = math.Inf(1)
	}
	return m
}

// grow makes room for slots leaves, keeping the weights set so far. The
// capacity is the smallest power of two (at least treeFanout) that holds
// every slot asked for so far, whatever the order of the calls.
func (t *sumTree) grow(slots int) {
	if slots <= t.n {
		return
	}
	n := max(treeFanout, t.n)
	for n < slots {
		n *= 2
	}
	old, oldMem := t.w, t.mem
	var mem *treeMaps
	t.n = n
	t.w = treeFloats(n, &mem)
	t.sum, t.min = t.sum[:0], t.min[:0]
	for size := n; ; {
		t.sum, t.min = append(t.sum, treeFloats(size, &mem)), append(t.min, fillInf(treeFloats(size, &mem)))
		if size == treeFanout {
			break
		}
		size = sumtree.Parent(size)
	}
	t.min = append(t.min, infs(1)) // the root
	t.mem = mem
	copy(t.w, old)
	for i, w := range old {
		if w > 0 {
			t.min[0][i] = w
		}
	}
	for l := range t.sum {
		for g := 0; g < len(t.sum[l]); g += treeFanout {
			t.pull(l, g/treeFanout)
		}
	}
	if oldMem != nil {
		oldMem.release() // old's levels: nothing refers to them now
	}
}

// nodeSum returns the sum of node x of level l.
func (t *sumTree) nodeSum(l, x int) float64 {
	if l == 0 {
		return t.w[x]
	}
	if i := x*treeFanout + treeFanout - 1; i < len(t.sum[l-1]) {
		return t.sum[l-1][i]
	}
	return 0 // padding past the last group of level l-1
}

// pull recomputes the running sums of group g of level l, and the
// minimum of node g of level l+1.
func (t *sumTree) pull(l, g int) {
	lo := g * treeFanout
	ps := (*[treeFanout]float64)(t.sum[l][lo:])
	m := (*[treeFanout]float64)(t.min[l][lo:])
	acc, mn := 0.0, math.Inf(1)
	for j := range treeFanout {
		acc += t.nodeSum(l, lo+j)
		ps[j] = acc
		mn = math.Min(mn, m[j])
	}
	t.min[l+1][g] = mn
}

// set stores the weight of a slot (0 removes it from sampling).
func (t *sumTree) set(slot int, w float64) {
	if w <= 0 {
		w = 0 // -0 too: the descent compares the bits of non-negative sums
	}
	t.w[slot] = w
	t.min[0][slot] = math.Inf(1)
	if w > 0 {
		t.min[0][slot] = w
	}
	for l := range t.sum {
		slot /= treeFanout
		t.pull(l, slot)
	}
}

func (t *sumTree) get(slot int) float64 { return t.w[slot] }

// total returns the sum of every weight, at least 0 (+Inf where the
// running sums overflowed). Every stored weight is at least 0 and never
// NaN (set stores 0 for w <= 0; callers pass a weight Table.weight took,
// or the device's p^a, which is never NaN), so a total below 0 or NaN is
// an internal inconsistency: it panics naming it, instead of letting
// samples fall back to uniform draws as an empty tree's do.
func (t *sumTree) total() float64 {
	if t.n == 0 {
		return 0
	}
	s := t.sum[len(t.sum)-1][treeFanout-1]
	if !(s >= 0) {
		panic(fmt.Sprintf("tensorbuf: internal error: sum tree total %v", s))
	}
	return s
}

func (t *sumTree) minPositive() float64 {
	if t.n == 0 {
		return math.Inf(1)
	}
	return t.min[len(t.min)-1][0]
}

// find returns the slot whose cumulative range contains u, for
// 0 <= u < total(). Rounding never lands on a zero-weight slot. It
// descends one draw with sumtree.Child; findMany moves a whole chunk a
// level at a time with treestep.Level, the same comparison, and
// TestFindMany checks the two descents against each other.
func (t *sumTree) find(u float64) int {
	i := 0
	for l := len(t.sum) - 1; l >= 0; l-- {
		var j int
		j, u = sumtree.Child((*[treeFanout]float64)(t.sum[l][i*treeFanout:]), u)
		i = i*treeFanout + j
	}
	return i
}

// findMany is find for many draws at once: it descends the tree one level
// at a time for a chunk of draws, so the cache misses of independent
// draws overlap instead of following each other, and after each level it
// prefetches the groups the chunk reads on the next (the chunk's lines fit
// the L1 cache). out[k] receives the slot of us[k], exactly as
// find(us[k]) would return it; us is overwritten (with what is left of
// each draw's mass in its leaf). The slots' weights are not read: a
// table keeps each in its item record (item.w), which a sample reads
// anyway.
func (t *sumTree) findMany(us []float64, out []int32) {
	if n := len(out); n >= treeSplit { // fanout.Run runs it here alone with one processor
		d := &t.job
		d.t, d.us, d.out = t, us, out
		fanout.Run(d, n, treeGrain, fanout.Procs())
		d.t, d.us, d.out = nil, nil, nil
		return
	}
	t.findRange(us, out)
}

// treeSplit is the fewest draws findMany splits over the fanout workers,
// in chunks of treeGrain draws: below it a worker woken from its parked
// thread starts too late for its share to pay off, and smaller chunks
// lose for the same reason (BenchmarkSumTreeFindMany, 8ary against
// 8ary-unsplit).
var treeSplit = 16384

// treeGrain is the draws of one chunk of a split descent (see treeSplit).
const treeGrain = 4096

// findRange is findMany on the calling goroutine.
func (t *sumTree) findRange(us []float64, out []int32) {
	for lo := 0; lo < len(out); lo += treeChunk {
		hi := min(lo+treeChunk, len(out))
		t.findChunk(us[lo:hi], out[lo:hi])
	}
}

// treeChunk is the draws findChunk descends together: their groups of one
// level, 128 lines of 64 bytes (8 KiB), stay in the L1 cache between the
// prefetch and the reads, and trajring bench --run prioritized found
// chunks of 64 and 256 no faster.
const treeChunk = 128

// treePrefetch switches findChunk's prefetch of each next level's groups
// (tests and BenchmarkSumTreePrefetch compare both ways): it overlaps the
// cache misses of a chunk's draws, which the descent alone does not.
var treePrefetch = prefetch.Enabled

// treeCachedLevel is the most float64s of a level that findChunk does
// not prefetch: a level of 32 KiB or less is read by every sample and
// stays in the cache, so prefetching it would only cost instructions
// (TestTableSampleHostSpeed, run with and without the limit, shows it
// no slower).
const treeCachedLevel = 4096

// findChunk descends every level, the leaves' running sums (sum[0])
// included, with treestep.Level: one 512-bit compare a draw where the
// CPU has AVX-512, two 256-bit ones where it has AVX2, the Go loop
// elsewhere; sumtree.ChildPast takes a draw that rounding put at or past
// its group's sum. It moves the whole chunk a level at a time, so that
// the draws' compares run back to back without a branch on their data
// (BenchmarkSumTreeFindMany; treestep's BenchmarkLevel).
func (t *sumTree) findChunk(us []float64, out []int32) {
	clear(out)
	for l := len(t.sum) - 1; l >= 0; l-- {
		level := t.sum[l]
		bits := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(level))), len(level))
		for d := 0; d < len(out); d++ {
			if d = treestep.Level(bits, us, out, d); d == len(out) {
				break
			}
			i := out[d]
			j, u := sumtree.ChildPast((*[treeFanout]float64)(level[int(i)*treeFanout:]), us[d])
			out[d], us[d] = i*treeFanout+int32(j), u
		}
		if treePrefetch {
			if l > 1 {
				if len(t.sum[l-1]) > treeCachedLevel {
					prefetch.Rows32(unsafe.Pointer(unsafe.SliceData(t.sum[l-1])), out, treeFanout*8)
				}
			} else if l == 1 {
				prefetch.Rows32(unsafe.Pointer(unsafe.SliceData(t.sum[0])), out, treeFanout*8)
			}
		}
	}
}
