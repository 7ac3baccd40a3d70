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
type Mirror struct {
	Items    Arena
	ItemsOff int64
	Live     Arena
	LiveOff  int64
	Slots    int64
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
//	trajring_patch_items(items, live, leaves, patches, npatch, lives, nlive)
//	trajring_draw_uniform(items, live, nlive, seed, call, prob, capacity, n, wins, keys, probs, weights)
//
// (leaves is the address of the sum tree's leaf weights, 0 for a mirror
// without a tree; prob is the 8 bytes of math.Float64bits.) One thread per
// patch or draw, grid-stride; y is unused (1).
