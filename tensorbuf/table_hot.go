package tensorbuf

import (
	"unsafe"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/internal/prefetch"
)

// hotItem is a uniform table's copy of what a sample reads of a live
// item, kept in Table.live's order (Table.hot[i] is the item of slot
// live[i], so it needs no slot of its own): a uniform draw indexes the
// live list, so with the copy there it reads one 64-byte line per item
// instead of a live entry and the item's 96-byte record (two or three
// lines at random, which made a table sample of 1M one-step items 1.6x a
// direct sample of the same steps). The record stays the item's home; the
// copy is updated where the record's Item changes (Insert,
// UpdatePriorities, a device table's learned priorities) and moves with
// the live list.
type hotItem struct {
	Item
	key uint64
	// sampled counts the item's draws through the copy (a uniform table
	// without MaxTimesSampled), which are not added to the record's
	// timesSampled at each draw; remove and snapshots add them.
	sampled uint64
	_       [8]byte
}

// hotItemSize is the bytes of one hotItem: a cache line.
const hotItemSize = int64(unsafe.Sizeof(hotItem{}))

// hotMaxItems bounds the live items a table keeps hot copies of (1 GiB of
// them): past it the table drops its copy for good and draws through the
// live list and the records, so that the tables of issue 44's huge sweeps
// (100M items, 146 bytes an item without the copy) still fit the memory
// they did. A variable for tests.
var hotMaxItems = 1 << 24

// Compile-time check that a hotItem is one cache line.
var _ [hotItemSize - 64]byte
var _ [64 - hotItemSize]byte

// keepsHot reports whether t keeps Table.hot: a uniform table (the only
// selector whose draws index the live list) that has not outgrown
// hotMaxItems. The caller holds t.mu.
func (t *Table) keepsHot() bool { return t.hotOn }

// hotAppend appends the copy of slot s's item, just appended to t.live,
// or drops the copy when t.live outgrew hotMaxItems. The caller holds
// t.mu.
func (t *Table) hotAppend(s int32) {
	if len(t.live) > hotMaxItems {
		t.dropHotLocked()
		return
	}
	if len(t.hot) == cap(t.hot) {
		t.hot = growMapped(t.hot, &t.hotMap) // a uniform draw reads it at random
	}
	it := &t.items[s]
	t.hot = append(t.hot, hotItem{Item: it.Item, key: it.key})
}

// hotRemove takes the copy at pos, the live position of the item of slot
// s being removed, out as remove takes s out of t.live (the last entry
// moves into pos), adding its draws to the record. The caller holds t.mu.
func (t *Table) hotRemove(s int32, pos int) {
	last := len(t.hot) - 1
	t.items[s].timesSampled += int(t.hot[pos].sampled)
	t.hot[pos] = t.hot[last]
	t.hot = t.hot[:last]
}

// dropHotLocked adds the draws counted in t.hot to the records and drops
// the copy. The caller holds t.mu.
func (t *Table) dropHotLocked() {
	t.foldHot(t.items)
	t.hot, t.hotMap, t.hotOn = nil, nil, false // the mapping goes with the GC (see growMapped)
}

// rebuildHotLocked makes t.hot again from t.live and the records (after a
// load, whose records hold the whole counts). The caller holds t.mu.
func (t *Table) rebuildHotLocked() {
	t.hot = t.hot[:0]
	t.hotOn = t.cfg.Selector == Uniform && len(t.live) <= hotMaxItems
	if !t.hotOn {
		t.hot, t.hotMap = nil, nil
		return
	}
	for _, s := range t.live {
		t.hotAppend(s)
	}
}

// setPriorityLocked sets slot s's Item.Priority in its record and its
// hot copy. The caller holds t.mu.
func (t *Table) setPriorityLocked(s int32, p float64) {
	it := &t.items[s]
	it.Priority = p
	if t.keepsHot() && it.live {
		t.hot[it.pos].Priority = p
	}
}

// foldHot adds the draws counted in t.hot to items, a copy of t.items
// (a snapshot's), so that its timesSampled are the items' whole counts.
// The caller holds t.mu.
func (t *Table) foldHot(items []item) {
	for i := range t.hot {
		items[t.live[i]].timesSampled += int(t.hot[i].sampled)
	}
}

// selectHotLocked is selectLocked's uniform selection without
// MaxTimesSampled: it draws n live positions with call's draws and reads
// each item from t.hot, prefetching a chunk ahead, writing what
// selectLocked writes; it returns the longest Len+Pad drawn. The caller
// holds t.mu and has counted the call.
func (t *Table) selectHotLocked(call uint64, pos []int32, items []Item, keys []uint64, probs, weights []float64, wins []Window) (maxLen int) {
	n, live := len(pos), len(t.hot)
	xs := grow(&t.xs, n)
	philox.Fill(xs, t.cfg.Seed, 0, call, 0)
	for k := range pos {
		pos[k] = int32(philox.Index(xs[k], uint64(live)))
	}
	base := unsafe.Pointer(unsafe.SliceData(t.hot))
	prefetch.Rows32(base, pos[:min(n, selectChunk)], hotItemSize)
	p := 1 / float64(live)
	for lo := 0; lo < n; lo += selectChunk {
		hi := min(lo+selectChunk, n)
		prefetch.Rows32(base, pos[hi:min(hi+selectChunk, n)], hotItemSize)
		for k := lo; k < hi; k++ {
			h := &t.hot[pos[k]]
			items[k], keys[k], probs[k], weights[k] = h.Item, h.key, p, 1
			if wins != nil {
				wins[k] = Window{Row: int64(h.Row), Start: h.Start, Len: int64(h.Len)}
			}
			maxLen = max(maxLen, h.Len+h.Pad)
			h.sampled++
		}
	}
	return maxLen
}
