package kernels

import "fmt"

// Device-resident table metadata (issue "Sampling on the device"). A
// table that selects on its backend keeps a mirror of its items there:
// one ItemRec per slot and the dense list of live slots (int32), patched
// before each device selection with the records and live entries that
// changed since the last one. A draw kernel then selects items from the
// mirror with the tables' Philox draws and writes each item's window, key,
// probability and importance weight to backend memory, where the window
// gather reads the windows.

// ItemRec is the mirror's record of one table slot, laid out as tr_item
// in kernels/host/select.h: four 8-byte words. Start is the item's
// absolute first step (the draw kernel reduces it modulo the capacity).
type ItemRec struct {
	Row   int64
	Start int64
	Len   int64
	Key   uint64
}

// ItemPatch writes Rec to slot Slot of a mirror, and Weight to the slot's
// leaf of the mirror's sum tree when it has one (tr_item_patch).
type ItemPatch struct {
	Slot   int64
	Rec    ItemRec
	Weight float64
}

// LivePatch sets entry Pos of a mirror's live list to Slot
// (tr_live_patch).
type LivePatch struct {
	Pos  int64
	Slot int64
}

// Sizes in bytes of the mirror's records and patches, and of one live
// entry (an int32 slot).
const (
	ItemRecSize   = 32
	ItemPatchSize = 48
	LivePatchSize = 16
	LiveSize      = 4
)

// Mirror names the arenas of a table's device mirror: Items holds Slots
// ItemRecs from byte ItemsOff, Live Slots int32 entries from byte LiveOff
// (the first NLive of a draw are the live slots, in the table's order).
// A prioritized table's mirror also has a sum tree of TreeN leaves
// (TreeN <= Slots, a power of two >= 8; 0 for none) of TreeDoubles(TreeN)
// float64s from byte TreeOff of Tree (kernels/host/tree.h gives the
// layout, the host tree's), and its update state (UpdateState(Slots,
// TreeN): claims, last device priorities, dirty groups) from byte
// WinnersOff of Winners (UpdatePriorities).
type Mirror struct {
	Items    Arena
	ItemsOff int64
	Live     Arena
	LiveOff  int64
	Slots    int64

	Tree       Arena
	TreeOff    int64
	TreeN      int64
	Winners    Arena
	WinnersOff int64

	// Round, when not nil, holds the table's round block (RoundWords
	// uint64s from byte RoundOff, a multiple of 8): draws on the mirror
	// then read their live count, uniform probability and beta from it
	// and add their Call to its base call, and priority updates add their
	// epoch to its base epoch (see RoundWords). A recorded round (a CUDA
	// graph of a round's draws and updates) reads the counters the host
	// uploads before each replay instead of those it was captured with.
	Round    Arena
	RoundOff int64
}

// The words of a round block (Mirror.Round; tr_round in
// kernels/host/select.h), each a uint64: RoundCall, the Philox call the
// round's draws count from (a draw's Call is then its index in the round);
// RoundNLive, the live items (a draw's NLive is then unchecked by the
// kernel); RoundProb and RoundBeta, the math.Float64bits of a uniform
// draw's probability and a prioritized draw's beta; RoundEpoch, the
// update epoch the round's priority updates count from.
const (
	RoundCall = iota
	RoundNLive
	RoundProb
	RoundBeta
	RoundEpoch
	RoundWords
)

// TreeLayout is the layout of a sum tree of n leaves in float64s (see
// kernels/host/tree.h, tr_tree_layout): level l's running sums start at
// Sum[l] (level 0's are the leaves' groups; the weights are at 0), the
// minima of level l >= 1 at Min[l] (Min[Levels] is the root's), Doubles
// in all.
type TreeLayout struct {
	Levels  int
	Size    [TreeMaxLevels]int64
	Sum     [TreeMaxLevels]int64
	Min     [TreeMaxLevels + 1]int64
	Doubles int64
}

// TreeMaxLevels is the most levels of a device sum tree (TR_TREE_MAXLEV):
// 2^33 leaves.
const TreeMaxLevels = 12

// Tree returns the layout of a tree of n leaves (a power of two >= 8),
// exactly as tensorbuf's host tree sizes its levels. It allocates
// nothing.
func Tree(n int64) TreeLayout {
	var t TreeLayout
	for s := n; ; {
		t.Size[t.Levels] = s
		t.Levels++
		if s <= 8 || t.Levels == TreeMaxLevels {
			break
		}
		s = (s + 7) / 8
		s = (s + 7) / 8 * 8
	}
	off := n
	for l := range t.Levels {
		t.Sum[l] = off
		off += t.Size[l]
	}
	t.Min[0] = -1
	for l := 1; l < t.Levels; l++ {
		t.Min[l] = off
		off += t.Size[l]
	}
	t.Min[t.Levels] = off
	t.Doubles = off + 1
	return t
}

// UpdateLayout is the layout of a prioritized mirror's update state, in
// bytes from Mirror.WinnersOff (kernels/host/tree.h, tr_ustate): Slots
// update claims (uint64) at 0; from Prios, Slots float32s, the priority of
// each slot's last device update; from Counts, TreeMaxLevels uint32s, the
// groups listed per level (0 between updates); from Marks, Groups uint32
// epochs, one per group of every level of the tree; from Lists, Groups
// uint32s, the groups to repair, level by level. Bytes in all.
type UpdateLayout struct {
	Prios, Counts, Marks, Lists int64
	Groups                      int64
	Bytes                       int64
}

// UpdateStepBytes is the bytes of update state a mirror reserves per
// slot: enough for UpdateState(slots, n).Bytes for every tree of n <=
// slots leaves once slots >= 64.
const UpdateStepBytes = 24

// UpdateState returns the update-state layout of a mirror of slots slots
// whose tree has treeN leaves (TreeLeaves). It allocates nothing.
func UpdateState(slots, treeN int64) UpdateLayout {
	t := Tree(treeN)
	var u UpdateLayout
	for l := range t.Levels {
		u.Groups += t.Size[l] / 8
	}
	u.Prios = 8 * slots
	u.Counts = 12 * slots
	u.Marks = u.Counts + 4*TreeMaxLevels
	u.Lists = u.Marks + 4*u.Groups
	u.Bytes = u.Lists + 4*u.Groups
	return u
}

// TreeLeaves reports whether n is a valid tree size: a power of two of
// at least 8 whose tree fits the kernels' 12 levels.
func TreeLeaves(n int64) bool { return n >= 8 && n&(n-1) == 0 && n <= 1<<33 }

// PrioritizedDraw describes one prioritized device selection
// (kernels/draw_prioritized.cu): as UniformDraw, but thread k descends the
// mirror's sum tree with u = philox.Float64(x) * total exactly as the host
// tree's find does, writing prob w/total and importance weight
// min(1, (w/wMin)^-Beta); with total 0 it selects uniformly from the live
// list, prob 1/NLive, weight 1, as the host does. Prob is unused.
type PrioritizedDraw struct {
	UniformDraw
	Beta float64
}

// UniformDraw describes one uniform device selection of N items from a
// mirror (kernels/draw_uniform.cu), thread k of which computes
//
//	x := philox.Draw(Seed, 0, Call, k)
//	slot := live[philox.Index(x, NLive)]
//	r := items[slot]
//	wins[k] = WinDesc{r.Row, r.Start % Capacity, r.Len}
//	keys[k], probs[k], weights[k] = r.Key, Prob, 1
//
// Out receives the N windows (WinDesc, 24 bytes each) from byte WinOff,
// the keys (uint64) from KeyOff, probabilities and weights (float64) from
// ProbOff and WeightOff, each offset a multiple of 8.
type UniformDraw struct {
	Mirror   Mirror
	NLive    int64
	Seed     uint64
	Call     uint64
	Prob     float64
	Capacity int64
	N        int64

	Out                                Arena
	WinOff, KeyOff, ProbOff, WeightOff int64
}

// BadPatch describes the first patch whose slot or position lies outside
// a mirror of slots slots; empty when there is none. Backends check every
// patch with it before writing anything.
func BadPatch(slots int64, items []ItemPatch, live []LivePatch) string {
	for i, p := range items {
		if p.Slot < 0 || p.Slot >= slots {
			return fmt.Sprintf("item patch %d: slot %d of %d", i, p.Slot, slots)
		}
	}
	for i, p := range live {
		if p.Pos < 0 || p.Pos >= slots || p.Slot < 0 || p.Slot >= slots {
			return fmt.Sprintf("live patch %d: entry %d = slot %d of %d", i, p.Pos, p.Slot, slots)
		}
	}
	return ""
}

// Arguments, in order, of the selection kernels (each 8 bytes wide):
//
//	trajring_patch_items(items, live, leaves, patches, npatch, lives, nlive, treen, groups)
//	trajring_draw_uniform(items, live, nlive, seed, call, prob, capacity, n, wins, keys, probs, weights, round)
//	trajring_tree_pull(tree, n, level, counts)
//	trajring_tree_repair(tree, treen, slots, state)
//	trajring_draw_prioritized(items, live, nlive, tree, n, seed, call, beta, capacity, ndraw, wins, keys, probs, weights, round)
//	trajring_update_claim(items, treen, keys, n, state, epoch, round)
//	trajring_update_apply(items, treen, keys, prios, n, slots, state, epoch, tree, a, round)
//
// (round is the address of the mirror's round block, 0 for none: see
// Mirror.Round; beta and a are the 8 bytes of math.Float64bits; prios are float32;
// state is the address of the mirror's update state, UpdateLayout, whose
// first words are the claims; groups, when not 0, lists the tree's groups
// above the patched leaves, level by level: trajring_patch_items then
// repairs them in the same launch, as one block whose levels are
// separated by __syncthreads.) trajring_tree_pull recomputes one level of
// the tree (one thread per group; a whole repair launches it for every
// level, leaves first), and with counts != 0 zeroes that level's count of
// an update state; trajring_update_claim makes the last update of each
// slot its winner with a 64-bit atomic max of epoch<<32 | i+1;
// trajring_update_apply then sets the winners' leaves and priorities and
// marks and lists the groups above them (atomic exchanges of the marks,
// atomic adds of the counts: tr_atomic_* in kernels.h), and
// trajring_tree_repair, one block, repairs the listed groups level by
// level (__syncthreads between levels) and zeroes the counts: a device
// priority update is three launches.
//
// (leaves is the address of the sum tree's leaf weights, 0 for a mirror
// without a tree; prob is the 8 bytes of math.Float64bits.) One thread per
// patch or draw, grid-stride; y is unused (1).
