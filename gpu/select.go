//go:build trajring_cuda

package gpu

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// mirror checks a table mirror's arenas and returns the device addresses
// of its records and live list. It runs on the backend.
func (b *Backend) mirror(m kernels.Mirror) (items, live uint64, err error) {
	it, err := b.arena(m.Items)
	if err != nil {
		return 0, 0, fmt.Errorf("mirror items: %w", err)
	}
	lv, err := b.arena(m.Live)
	if err != nil {
		return 0, 0, fmt.Errorf("mirror live list: %w", err)
	}
	if m.Slots < 0 || m.ItemsOff%8 != 0 || m.LiveOff%4 != 0 ||
		!kernels.Fits(m.ItemsOff, m.Slots, kernels.ItemRecSize, it.size) || !kernels.Fits(m.LiveOff, m.Slots, kernels.LiveSize, lv.size) {
		return 0, 0, fmt.Errorf("%w: mirror of %d slots at %d/%d in %d/%d bytes", ErrBounds, m.Slots, m.ItemsOff, m.LiveOff, it.size, lv.size)
	}
	return uint64(it.ptr) + uint64(m.ItemsOff), uint64(lv.ptr) + uint64(m.LiveOff), nil
}

// round checks a mirror's round block (kernels.Mirror.Round) and returns
// its device address, 0 for a mirror without one. It runs on the backend.
func (b *Backend) round(m kernels.Mirror) (uint64, error) {
	if m.Round == nil {
		return 0, nil
	}
	r, err := b.arena(m.Round)
	if err != nil {
		return 0, fmt.Errorf("mirror round block: %w", err)
	}
	if m.RoundOff%8 != 0 || !kernels.Fits(m.RoundOff, kernels.RoundWords, 8, r.size) {
		return 0, fmt.Errorf("%w: round block of %d words at %d in %d bytes", ErrBounds, kernels.RoundWords, m.RoundOff, r.size)
	}
	return uint64(r.ptr) + uint64(m.RoundOff), nil
}

// PatchItems writes changed records and live entries into a table's
// mirror in one launch (kernels/patch_items.cu; the loop is
// cpu.Backend.PatchItems'): the patches are staged in pinned memory and
// copied with the launch's parameter block, so items and live may be
// reused at once. With a sum tree (m.TreeN > 0) each patch's Weight goes
// to its slot's leaf too (slots below TreeN), and the tree is repaired
// above the patched leaves: in the same launch, run as one block that
// repairs the listed groups level by level, for up to patchRepairMax
// patches; with more, by a repair of every level (one launch each). Every slot and position must lie in [0, m.Slots)
// (ErrBounds otherwise, nothing queued), and each slot and each position
// may appear once (threads write them in no particular order). No
// patches means no launch. It is safe for concurrent use.
func (b *Backend) PatchItems(m kernels.Mirror, items []kernels.ItemPatch, live []kernels.LivePatch) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	ia, la, err := b.mirror(m)
	if err != nil {
		return err
	}
	if problem := kernels.BadPatch(m.Slots, items, live); problem != "" {
		return fmt.Errorf("%w: %s", ErrBounds, problem)
	}
	var leaves uint64
	if m.TreeN > 0 {
		if leaves, err = b.tree(m); err != nil {
			return err
		}
		for _, p := range items {
			if p.Slot >= m.TreeN {
				return fmt.Errorf("%w: item patch of slot %d past the tree's %d leaves", ErrBounds, p.Slot, m.TreeN)
			}
		}
	}
	ni, nl := int64(len(items)), int64(len(live))
	if ni+nl == 0 {
		return nil
	}
	// With a tree and few patches, the same launch repairs the groups
	// above the patched leaves as one block; with many, a grid patches
	// and a repair of every level follows.
	repairIn := leaves != 0 && ni > 0 && ni <= patchRepairMax
	var groups []int64
	if repairIn {
		groups = b.treeGroups(items, m.TreeN)
	}
	var l layout
	itemOff := l.add(ni * kernels.ItemPatchSize)
	liveOff := l.add(nl * kernels.LivePatchSize)
	groupOff := l.add(int64(len(groups)) * 8)
	st, err := b.slot(l.n)
	if err != nil {
		return err
	}
	buf := st.bytes(l.n)
	if ni > 0 {
		copy(unsafe.Slice((*kernels.ItemPatch)(unsafe.Pointer(&buf[itemOff])), ni), items)
	}
	if nl > 0 {
		copy(unsafe.Slice((*kernels.LivePatch)(unsafe.Pointer(&buf[liveOff])), nl), live)
	}
	var ga uint64
	threads := ni + nl
	if repairIn {
		copy(int64Slice(buf, groupOff, int64(len(groups))), groups)
		ga = uint64(st.dev) + uint64(groupOff)
		threads = 1 // one block
	}
	if err := b.launch(kernels.PatchItems, st, l.n, threads, 1, 1,
		ia, la, leaves, uint64(st.dev)+uint64(itemOff), uint64(ni), uint64(st.dev)+uint64(liveOff), uint64(nl),
		uint64(m.TreeN), ga); err != nil {
		return err
	}
	if leaves == 0 || ni == 0 || repairIn {
		return nil
	}
	lay := kernels.Tree(m.TreeN)
	for l := range lay.Levels {
		if err := b.launchGrid(kernels.TreePull, lay.Size[l]/8, 1, 1, leaves, uint64(m.TreeN), uint64(l), 0); err != nil {
			return err
		}
	}
	return nil
}

// patchRepairMax is the most item patches whose tree repair PatchItems
// folds into its launch (one block of blockSize threads); more patch with
// a grid and repair every level in launches of their own.
var patchRepairMax int64 = 4096

// treeGroups lists the groups above the patched slots, level by level,
// each once, in the layout tr_repair_groups_run reads: the number of
// levels, the groups per level, then the groups of level 0, 1, ... It
// reuses backend scratch (no allocation once grown). It runs with the
// backend entered.
func (b *Backend) treeGroups(items []kernels.ItemPatch, treeN int64) []int64 {
	lay := kernels.Tree(treeN)
	lv := lay.Levels
	cur := b.groupScratch[:0]
	for _, p := range items {
		cur = append(cur, p.Slot/8)
	}
	slices.Sort(cur)
	cur = slices.Compact(cur)
	out := append(b.groupOut[:0], int64(lv))
	for range lv {
		out = append(out, 0)
	}
	for l := range lv {
		out[1+l] = int64(len(cur))
		out = append(out, cur...)
		next := cur[:0] // in place: parents of a sorted list, sorted
		for i, g := range cur {
			if p := g / 8; i == 0 || p != next[len(next)-1] {
				next = append(next, p)
			}
		}
		cur = next
	}
	b.groupScratch, b.groupOut = cur[:0], out
	return out
}

// DrawUniform selects d.N items uniformly from a table's mirror in one
// launch (kernels/draw_uniform.cu; the loop is in kernels.UniformDraw and
// cpu.Backend.DrawUniform, its reference): thread k draws
// philox.Draw(d.Seed, 0, d.Call, k) and writes the drawn item's window,
// key, probability and weight to d.Out. Every argument travels as a
// kernel parameter (with a round block, d.Mirror.Round, the kernel reads
// the call's base, the live count and the probability from it):
// nothing is copied to the device and nothing waits.
// The arguments are checked (ErrBounds, nothing queued) but the live
// entries are not (they are in device memory): PatchItems checked them
// when it wrote them, and a fresh mirror holds zeros. It is safe for
// concurrent use.
func (b *Backend) DrawUniform(d kernels.UniformDraw) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	ia, la, err := b.mirror(d.Mirror)
	if err != nil {
		return err
	}
	ra, err := b.round(d.Mirror)
	if err != nil {
		return err
	}
	o, err := b.arena(d.Out)
	if err != nil {
		return fmt.Errorf("draw output: %w", err)
	}
	if d.NLive <= 0 || d.NLive > d.Mirror.Slots || d.N < 0 || d.Capacity <= 0 || d.N > math.MaxUint32+1 {
		return fmt.Errorf("%w: %d draws from %d live items of %d slots, capacity %d", ErrBounds, d.N, d.NLive, d.Mirror.Slots, d.Capacity)
	}
	if d.WinOff%8 != 0 || d.KeyOff%8 != 0 || d.ProbOff%8 != 0 || d.WeightOff%8 != 0 ||
		!kernels.Fits(d.WinOff, d.N, kernels.WinDescSize, o.size) || !kernels.Fits(d.KeyOff, d.N, 8, o.size) ||
		!kernels.Fits(d.ProbOff, d.N, 8, o.size) || !kernels.Fits(d.WeightOff, d.N, 8, o.size) {
		return fmt.Errorf("%w: %d draws at %d/%d/%d/%d into %d bytes", ErrBounds, d.N, d.WinOff, d.KeyOff, d.ProbOff, d.WeightOff, o.size)
	}
	if d.N == 0 {
		return nil
	}
	out := uint64(o.ptr)
	return b.launchGrid(kernels.DrawUniform, d.N, 1, 1,
		ia, la, uint64(d.NLive), d.Seed, d.Call, math.Float64bits(d.Prob), uint64(d.Capacity), uint64(d.N),
		out+uint64(d.WinOff), out+uint64(d.KeyOff), out+uint64(d.ProbOff), out+uint64(d.WeightOff), ra)
}

// GatherWindowsAt is GatherWindows with the windows read from device
// memory: nwin kernels.WinDesc records (Start already the slot, as
// DrawUniform writes them) from byte offset winOff of wins, a multiple
// of 8. The column descriptors and pad steps are kept on the device per
// set of columns (the last 8 sets used): a batch sampled again and again
// launches its gather with nothing copied to the device and no staging
// slot to wait for; a new set costs one staged copy. Columns, outputs and
// mask are checked as GatherWindows checks them, a cached set of columns
// once for as many output steps and the same capacity while its arenas
// live (the checks cannot change then); the windows cannot be (they are
// in device memory, and reading them would wait for the work that writes
// them): each must have 0 <= Row < the rings' rows, 0 <= Start <
// capacity and 0 <= Len <= min(seqLen, capacity), as the draw kernels
// write them from a table's items. It is safe for concurrent use.
func (b *Backend) GatherWindowsAt(cols []kernels.Column, wins kernels.Arena, winOff, nwin, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	w, err := b.arena(wins)
	if err != nil {
		return fmt.Errorf("windows: %w", err)
	}
	if nwin < 0 || winOff%8 != 0 || !kernels.Fits(winOff, nwin, kernels.WinDescSize, w.size) {
		return fmt.Errorf("%w: %d windows at %d into %d bytes", ErrBounds, nwin, winOff, w.size)
	}
	if seqLen <= 0 || capacity <= 0 {
		return fmt.Errorf("%w: sequence length %d, capacity %d", ErrBounds, seqLen, capacity)
	}
	n, ok := kernels.Mul(nwin, seqLen)
	if !ok {
		return fmt.Errorf("%w: %d windows of %d steps", ErrBounds, nwin, seqLen)
	}
	// A batch sampled again and again passes the same columns: their
	// checks hold as long as their arenas live (sizes never change).
	cb := b.checkedCols(cols, n, capacity)
	var rings, outs []*Arena
	if cb == nil {
		if c, bad := kernels.WritesRing(cols); bad {
			return fmt.Errorf("%w: column %d writes a ring arena", ErrBounds, c)
		}
		if rings, outs, _, err = b.windowCols(cols, n, capacity); err != nil {
			return err
		}
	}
	maskPtr, err := b.maskAddr(mask, maskOff, n)
	if err != nil {
		return err
	}
	if n == 0 || (len(cols) == 0 && maskPtr == 0) {
		return nil
	}
	if cb == nil {
		if cb, err = b.colBlock(cols, rings, outs, n, capacity); err != nil {
			return err
		}
	}
	gy := int64(len(cols))
	if maskPtr != 0 {
		gy++
	}
	return b.launchGrid(kernels.GatherWindows, n, cb.words, gy,
		uint64(cb.block.ptr), uint64(len(cols)), uint64(w.ptr)+uint64(winOff), uint64(nwin),
		uint64(seqLen), uint64(capacity), maskPtr)
}

// colCacheSize is how many sets of column descriptors GatherWindowsAt
// keeps on the device: one per batch sampled in turn, typically. Sets a
// CUDA graph captured are pinned (see colBlock.pinned) and come on top.
const colCacheSize = 8

// colBlockUnit rounds up the size of a column descriptor block.
const colBlockUnit = 1024

// colBlock is one set of column descriptors (and pad steps) in device
// memory, for the columns cols (copied, Pad included).
type colBlock struct {
	cols  []kernels.Column
	block *Arena
	words int64 // maxWords of the descriptors
	used  uint64

	// pinned is set once a graph capture used the set: a graph replays
	// the block's address, so the block is never evicted nor refilled
	// (graphs are not tracked to their destruction; a pinned set stays
	// until Close, a KiB or so each).
	pinned bool

	// What GatherWindowsAt has checked cols for: gathers of up to steps
	// output steps from rings of capacity steps, its arenas rings and
	// outs (0 steps: not checked).
	steps, capacity int64
	rings, outs     []*Arena
}

// noteChecked records that c's columns passed GatherWindowsAt's checks for
// n output steps from rings of capacity steps, with arenas rings and outs.
func (c *colBlock) noteChecked(rings, outs []*Arena, n, capacity int64) {
	if c.capacity != capacity {
		c.capacity, c.steps = capacity, 0
	}
	c.steps = max(c.steps, n)
	c.rings, c.outs = append(c.rings[:0], rings...), append(c.outs[:0], outs...)
}

// checkedCols returns the cache entry of cols when GatherWindowsAt has
// checked them (WritesRing, windowCols) for at least n output steps from
// rings of capacity steps and none of their arenas has been freed since,
// or nil. It runs with the backend entered.
func (b *Backend) checkedCols(cols []kernels.Column, n, capacity int64) *colBlock {
	for i := range b.colCache {
		c := &b.colCache[i]
		if c.steps < n || c.capacity != capacity || c.block == nil || c.block.freed || !c.matches(cols) {
			continue
		}
		for j := range c.rings {
			if c.rings[j].freed || c.outs[j].freed {
				return nil
			}
		}
		b.colTick++
		c.used = b.colTick
		c.pinned = c.pinned || b.capturing
		return c
	}
	return nil
}

func (c *colBlock) matches(cols []kernels.Column) bool {
	if c.block == nil || len(c.cols) != len(cols) {
		return false
	}
	for i := range cols {
		a, b := &c.cols[i], &cols[i]
		if a.Ring != b.Ring || a.Out != b.Out || a.OutOff != b.OutOff || a.StepBytes != b.StepBytes ||
			a.Stride != b.Stride || a.Offset != b.Offset || (a.Pad == nil) != (b.Pad == nil) || !bytes.Equal(a.Pad, b.Pad) {
			return false
		}
	}
	return true
}

// colBlock returns the device descriptors of cols (already checked for n
// output steps from rings of capacity steps, their arenas rings and outs;
// the entry records it for checkedCols), from the cache or, on a miss,
// written by one staged copy into the block of the least recently used
// entry, which it replaces (a new block only when that one is too small,
// so that a steady state of evictions allocates, frees and waits for
// nothing). A batch sampled again and again thus launches its gather
// without copying anything to the device. It runs with the backend
// entered.
func (b *Backend) colBlock(cols []kernels.Column, rings, outs []*Arena, n, capacity int64) (*colBlock, error) {
	b.colTick++
	if b.colCache == nil {
		b.colCache = make([]colBlock, colCacheSize)
	}
	var victim *colBlock
	for i := range b.colCache {
		c := &b.colCache[i]
		if c.matches(cols) && !c.block.freed {
			c.used = b.colTick
			c.pinned = c.pinned || b.capturing
			c.noteChecked(rings, outs, n, capacity)
			return c, nil
		}
		if !c.pinned && (victim == nil || c.used < victim.used) {
			victim = c
		}
	}
	if b.capturing {
		// The staged copy would be captured too, and a replay would copy
		// whatever the staging slot then holds.
		return nil, fmt.Errorf("%w: a new set of %d columns during a graph capture (gather them once before capturing)", ErrDriver, len(cols))
	}
	if victim == nil { // every set is pinned by a graph: one more entry
		b.colCache = append(b.colCache, colBlock{})
		victim = &b.colCache[len(b.colCache)-1]
	}
	if err := b.bindNow(); err != nil { // entered by enterLaunch
		return nil, err
	}
	var l layout
	descOff, padOff := b.windowDescLayout(&l, cols)
	victim.cols = victim.cols[:0] // matches nothing until refilled
	if victim.block != nil && victim.block.size < l.n {
		// Too small. Work queued earlier may still read it.
		if err := b.syncStream(); err != nil {
			return nil, err
		}
		if err := b.freeArena(victim.block); err != nil {
			return nil, err
		}
		victim.block = nil
	}
	block := victim.block
	if block == nil {
		// Blocks are whole KiBs, so that an evicted one usually fits the
		// next set of columns as it is.
		size := (l.n + colBlockUnit - 1) / colBlockUnit * colBlockUnit
		p, err := cu.MemAlloc(size)
		if err != nil {
			return nil, driverErr("cuMemAlloc (column descriptors)", err)
		}
		block = &Arena{ptr: p, size: size, owner: b}
		b.arenas[block] = struct{}{} // freed by Close with the rest
		victim.block = block
	}
	p := block.ptr
	st, err := b.slot(l.n)
	if err != nil {
		return nil, err
	}
	descs := putWindowDescs(st.bytes(l.n), uint64(p), descOff, padOff, cols, rings, outs)
	// Reusing an evicted block needs no wait: the gathers queued before
	// that read it run before this copy on the same stream.
	if err := cu.MemcpyHtoDAsync(p, st.host, l.n, b.stream); err != nil {
		return nil, driverErr("cuMemcpyHtoDAsync", err)
	}
	if err := st.record(b.stream); err != nil {
		return nil, err
	}
	victim.cols = victim.cols[:0]
	for _, c := range cols {
		if c.Pad != nil {
			c.Pad = bytes.Clone(c.Pad)
		}
		victim.cols = append(victim.cols, c)
	}
	victim.block, victim.words, victim.used = block, maxWords(descs), b.colTick
	victim.steps, victim.capacity = 0, 0 // the old columns' checks
	victim.noteChecked(rings, outs, n, capacity)
	return victim, nil
}
