package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/internal/sumtree"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// treeOf checks a mirror's sum tree and returns its float64s (nil for a
// mirror without one).
func treeOf(m kernels.Mirror) ([]float64, error) {
	if m.TreeN == 0 {
		return nil, nil
	}
	t, err := host(m.Tree)
	if err != nil {
		return nil, fmt.Errorf("mirror tree: %w", err)
	}
	if !kernels.TreeLeaves(m.TreeN) || m.TreeN > m.Slots || m.TreeOff%8 != 0 {
		return nil, fmt.Errorf("%w: tree of %d leaves at %d for %d slots", ErrBounds, m.TreeN, m.TreeOff, m.Slots)
	}
	n := kernels.Tree(m.TreeN).Doubles
	if !kernels.Fits(m.TreeOff, n, 8, t.Size()) {
		return nil, fmt.Errorf("%w: tree of %d leaves at %d in %d bytes", ErrBounds, m.TreeN, m.TreeOff, t.Size())
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&t.b[m.TreeOff])), n), nil
}

// stateOf checks a mirror's update state (kernels.UpdateState) and
// returns its claims, last priorities, counts, marks and lists.
func stateOf(m kernels.Mirror) (win []uint64, prios []float32, counts, marks, lists []uint32, err error) {
	w, err := host(m.Winners)
	if err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("mirror claims: %w", err)
	}
	u := kernels.UpdateState(m.Slots, m.TreeN)
	if m.WinnersOff%8 != 0 || !kernels.Fits(m.WinnersOff, u.Bytes, 1, w.Size()) || m.Slots == 0 {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: update state of %d bytes at %d in %d bytes", ErrBounds, u.Bytes, m.WinnersOff, w.Size())
	}
	b := w.b[m.WinnersOff:]
	win = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), m.Slots)
	prios = unsafe.Slice((*float32)(unsafe.Pointer(&b[u.Prios])), m.Slots)
	counts = unsafe.Slice((*uint32)(unsafe.Pointer(&b[u.Counts])), kernels.TreeMaxLevels)
	marks = unsafe.Slice((*uint32)(unsafe.Pointer(&b[u.Marks])), u.Groups)
	lists = unsafe.Slice((*uint32)(unsafe.Pointer(&b[u.Lists])), u.Groups)
	return win, prios, counts, marks, lists, nil
}

// RepairTree recomputes every running sum and minimum of a mirror's sum
// tree from its leaves, level by level, leaves first (the reference of
// kernels/tree_pull.cu, launched once per level): group g of level l gets
// the running sums of its 8 nodes' sums, left to right, and node g of
// level l+1 their minimum, exactly as the host tree's pull (tensorbuf).
// It is safe for concurrent use on distinct mirrors.
func (*Backend) RepairTree(m kernels.Mirror) error {
	if _, _, err := mirror(m); err != nil {
		return err
	}
	tree, err := treeOf(m)
	if err != nil {
		return err
	}
	if tree == nil {
		return fmt.Errorf("%w: mirror without a tree", ErrBounds)
	}
	lay := kernels.Tree(m.TreeN)
	for l := range int64(lay.Levels) {
		for g := range lay.Size[l] / 8 {
			pullGroup(tree, &lay, l, g)
		}
	}
	return nil
}

// pullGroup recomputes group g of level l of a tree (kernels/host/tree.h,
// tr_tree_pull_group): the running sums of its 8 nodes' sums, left to
// right, and their minimum, the minimum of node g one level up.
func pullGroup(tree []float64, lay *kernels.TreeLayout, l, g int64) {
	acc, mn := 0.0, math.Inf(1)
	for j := range int64(8) {
		x := g*8 + j
		var s float64
		mv := math.Inf(1)
		if l == 0 {
			if s = tree[x]; s > 0 {
				mv = s
			}
		} else if c := x*8 + 7; c < lay.Size[l-1] {
			// Nodes past the groups of the level below are padding:
			// sum 0 and minimum +Inf, as the host tree stores them.
			s, mv = tree[lay.Sum[l-1]+c], tree[lay.Min[l]+x]
		}
		acc += s
		tree[lay.Sum[l]+x] = acc
		if mv < mn {
			mn = mv
		}
	}
	tree[lay.Min[l+1]+g] = mn
}

// repairAbove recomputes the groups above the given slots' leaves, each
// slot's from the leaves up, after all the leaves were written: the last
// pull of every group then sees its children's final sums, so the tree
// equals the one RepairTree computes (given a consistent tree before).
func repairAbove(tree []float64, treeN int64, items []kernels.ItemPatch) {
	lay := kernels.Tree(treeN)
	for _, p := range items {
		g := p.Slot
		for l := range int64(lay.Levels) {
			g /= 8
			pullGroup(tree, &lay, l, g)
		}
	}
}

// DrawPrioritized selects d.N items from a mirror's sum tree (the
// reference of kernels/draw_prioritized.cu; see kernels.PrioritizedDraw):
// draw k descends the tree with u = philox.Float64(x)*total exactly as the
// host tree's find, and its weight is math.Min(1, math.Pow(w/wMin,
// -Beta)), bit for bit the host's importance weight (the device's pow
// may differ in the last bit; a round block's counters apply as
// kernels.Mirror.Round says). It is safe for concurrent use by calls
// writing disjoint outputs.
func (*Backend) DrawPrioritized(d kernels.PrioritizedDraw) error {
	recs, live, err := mirror(d.Mirror)
	if err != nil {
		return err
	}
	var r []uint64
	if d.UniformDraw, r, err = inRound(d.UniformDraw); err != nil {
		return err
	} else if r != nil {
		d.Beta = math.Float64frombits(r[kernels.RoundBeta])
	}
	tree, err := treeOf(d.Mirror)
	if err != nil {
		return err
	}
	o, err := host(d.Out)
	if err != nil {
		return fmt.Errorf("draw output: %w", err)
	}
	if tree == nil || d.NLive <= 0 || d.NLive > d.Mirror.Slots || d.N < 0 || d.Capacity <= 0 || !(d.Beta >= 0) {
		return fmt.Errorf("%w: %d draws from %d live items of %d slots (tree of %d), capacity %d, beta %v", ErrBounds, d.N, d.NLive, d.Mirror.Slots, d.Mirror.TreeN, d.Capacity, d.Beta)
	}
	if !drawOut(o, d.UniformDraw) {
		return fmt.Errorf("%w: %d draws at %d/%d/%d/%d into %d bytes", ErrBounds, d.N, d.WinOff, d.KeyOff, d.ProbOff, d.WeightOff, o.Size())
	}
	lay := kernels.Tree(d.Mirror.TreeN)
	total := tree[lay.Sum[lay.Levels-1]+7]
	wMin := tree[lay.Min[lay.Levels]]
	if !(total > 0) { // the draws read the live list (the tree's descents stay below TreeN)
		if err := checkDrawn(d.Seed, d.Call, d.N, live[:d.NLive], d.Mirror.Slots); err != nil {
			return err
		}
	}
	if d.N == 0 {
		return nil
	}
	wins, keys, probs, weights := drawViews(o, d.UniformDraw)
	for k := range d.N {
		x := philox.Draw(d.Seed, 0, d.Call, uint32(k))
		var slot int64
		p, wt := 1/float64(d.NLive), 1.0
		if total > 0 {
			u := philox.Float64(x) * total
			for l := lay.Levels - 1; l >= 0; l-- {
				var j int
				j, u = sumtree.Child((*[sumtree.Fanout]float64)(tree[lay.Sum[l]+slot*8:]), u)
				slot = slot*8 + int64(j)
			}
			w := tree[slot]
			p = w / total
			if d.Beta != 0 && wMin > 0 && w > 0 {
				wt = math.Min(1, math.Pow(w/wMin, -d.Beta))
			}
		} else {
			slot = int64(live[philox.Index(x, uint64(d.NLive))])
		}
		r := &recs[slot]
		wins[k] = kernels.WinDesc{Row: r.Row, Start: r.Start % d.Capacity, Len: r.Len}
		keys[k], probs[k], weights[k] = r.Key, p, wt
	}
	return nil
}

// UpdatePriorities sets the leaf weights of a mirror's sum tree from n
// keys (uint64, as a table makes them: gen<<32 | slot) and float32
// priorities, both host tensors of this backend's memory (the reference
// of kernels/update_claim.cu, update_apply.cu and tree_repair.cu): the
// last update of a slot wins (claimed by epoch<<32 | i+1, epoch larger
// than any before on this mirror), keys that name no live item of the
// mirror are skipped, and a winning priority that is negative, NaN or
// infinite leaves its slot as it was; the others set its leaf to p^a (p
// itself when a is 1) and its entry of the update state's priorities to
// p, and mark the groups above the leaf with the epoch. It then repairs
// the tree above the leaves it set, listing the marked groups level by
// level as the device does (in update order; the device's order is not
// defined) and zeroing the counts after: the tree a whole RepairTree
// gives, from a consistent tree. With a round block (m.Round) epoch is
// added to the block's base epoch. It is safe for concurrent use on
// distinct mirrors.
func (*Backend) UpdatePriorities(m kernels.Mirror, keys, prios *tensor.Dense, epoch uint64, a float64) error {
	recs, _, err := mirror(m)
	if err != nil {
		return err
	}
	tree, err := treeOf(m)
	if err != nil {
		return err
	}
	if tree == nil {
		return fmt.Errorf("%w: mirror without a tree", ErrBounds)
	}
	win, pri, counts, marks, lists, err := stateOf(m)
	if err != nil {
		return err
	}
	r, err := roundOf(m)
	if err != nil {
		return err
	}
	if r != nil {
		epoch += r[kernels.RoundEpoch]
	}
	if keys == nil || prios == nil || keys.Dtype() != tensor.Uint64 || prios.Dtype() != tensor.Float32 || !keys.IsNativelyAccessible() || !prios.IsNativelyAccessible() {
		return fmt.Errorf("%w: keys and priorities must be uint64 and float32 host tensors", ErrBounds)
	}
	// The tensors' bytes (Data would allocate an interface per call).
	kr, pr := keys.Header.Raw, prios.Header.Raw
	ks := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(kr))), len(kr)/8)[:keys.DataSize()]
	ps := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(pr))), len(pr)/4)[:prios.DataSize()]
	if len(ks) != len(ps) || !(a >= 0) || math.IsInf(a, 0) || epoch >= 1<<32 {
		return fmt.Errorf("%w: %v keys (%v), %v priorities (%v), a %v, epoch %d", ErrBounds, keys.Shape(), keys.Dtype(), prios.Shape(), prios.Dtype(), a, epoch)
	}
	slot := func(k uint64) int64 {
		s := int64(k & (1<<32 - 1))
		if k == 0 || s >= m.TreeN || s >= m.Slots || recs[s].Key != k {
			return -1
		}
		return s
	}
	for i, k := range ks {
		if s := slot(k); s >= 0 {
			win[s] = max(win[s], epoch<<32|uint64(i+1))
		}
	}
	lay := kernels.Tree(m.TreeN)
	var goff [kernels.TreeMaxLevels + 1]int64
	for l := range lay.Levels {
		goff[l+1] = goff[l] + lay.Size[l]/8
	}
	for i, k := range ks {
		s := slot(k)
		if s < 0 || win[s] != epoch<<32|uint64(i+1) {
			continue
		}
		p := float64(ps[i])
		if !(p >= 0 && p <= math.MaxFloat64) {
			continue
		}
		if a == 1 {
			tree[s] = p
		} else {
			tree[s] = math.Pow(p, a)
		}
		pri[s] = ps[i]
		g := s
		for l := range lay.Levels {
			g /= 8
			if marks[goff[l]+g] == uint32(epoch) {
				break // listed, with every group above
			}
			marks[goff[l]+g] = uint32(epoch)
			if k := int64(counts[l]); k < goff[l+1]-goff[l] {
				lists[goff[l]+k] = uint32(g)
			}
			counts[l]++
		}
	}
	// Repair the listed groups, level by level (a level whose count
	// exceeds its groups, left over by a failed device repair, whole).
	for l := range int64(lay.Levels) {
		ng := goff[l+1] - goff[l]
		if k := int64(counts[l]); k > ng {
			for g := range ng {
				pullGroup(tree, &lay, l, g)
			}
		} else {
			for _, g := range lists[goff[l] : goff[l]+k] {
				pullGroup(tree, &lay, l, int64(g))
			}
		}
	}
	clear(counts)
	return nil
}
