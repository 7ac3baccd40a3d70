package tensorbuf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// install gives a new, empty table of a loaded buffer the saved state s,
// after checking every invariant the table's code relies on: a checkpoint
// that passes its checksums but breaks one (a bug, or a crafted file) is
// refused instead of corrupting later samples. The caller has restored
// the buffer's cursors; nobody else holds the buffer yet.
//
// The steps, in order: the lengths of the per-slot and per-row lists,
// each item (checkItems), the table's counters against the items
// (checkTotals), the live and free lists (indexLists), the insertion
// order (linkOrder), the start heaps (startHeaps); then, under t.mu, the
// draw state, the adopted lists and the sum tree (installTreeLocked).
func (t *Table) install(s *tableSnap) error {
	if err := s.checkLengths(t.b.numEnvs); err != nil {
		return err
	}
	tot, err := t.checkItems(s)
	if err != nil {
		return err
	}
	if err := t.checkTotals(s, tot); err != nil {
		return err
	}
	if err := s.indexLists(tot.live); err != nil {
		return err
	}
	head, tail, err := s.linkOrder()
	if err != nil {
		return err
	}
	starts, err := s.startHeaps(t.b.numEnvs)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	calls, err := unmarshalDraws(s.rng)
	if err != nil {
		return fmt.Errorf("rng: %v", err)
	}
	t.calls = calls
	t.items, t.itemMap, t.gens, t.free, t.live = s.items, s.itemMap, s.gens, s.free, s.live
	t.head, t.tail, t.starts = head, tail, starts
	t.nextKey, t.maxLen, t.budget, t.inserts, t.samples = s.nextKey, s.maxLen, s.budget, s.inserts, s.samples
	t.maxPriority, t.hasMaxPriority = s.maxPriority, s.hasMax
	t.orderRebuildLocked()
	t.rebuildHotLocked()
	return t.installTreeLocked()
}

// checkLengths checks that s has a generation per slot and a start heap
// per row of the buffer's rows.
func (s *tableSnap) checkLengths(rows int) error {
	if len(s.gens) != len(s.items) {
		return fmt.Errorf("%d generations for %d slots", len(s.gens), len(s.items))
	}
	if len(s.heapLen) != rows {
		return fmt.Errorf("%d start heaps for %d rows", len(s.heapLen), rows)
	}
	return nil
}

// itemTotals is what checkItems adds up over a snapshot's live items.
type itemTotals struct {
	live   int   // live items
	budget int64 // samples left to them under MaxTimesSampled
	maxLen int   // the longest, pad steps included
}

// checkItems derives every slot's key from its generation, resets its
// links (pos, hpos, prev, next: -1, for the later steps to mark) and
// checks every live item (checkItem), adding up their totals.
func (t *Table) checkItems(s *tableSnap) (itemTotals, error) {
	var tot itemTotals
	for i := range s.items {
		it := &s.items[i]
		if s.gens[i] == 0 {
			return tot, fmt.Errorf("slot %d: generation 0", i)
		}
		it.key = uint64(s.gens[i])<<32 | uint64(i)
		it.pos, it.hpos, it.prev, it.next = -1, -1, -1, -1
		if !it.live {
			continue
		}
		tot.live++
		if err := t.checkItem(i, it); err != nil {
			return tot, err
		}
		if mts := t.cfg.MaxTimesSampled; mts > 0 {
			tot.budget += int64(mts - it.timesSampled)
		}
		tot.maxLen = max(tot.maxLen, it.Len+it.Pad)
	}
	return tot, nil
}

// checkItem checks live item it of slot i: its steps fit the capacity
// and lie within its row's stored steps, its priority has a weight, and
// it has samples left under MaxTimesSampled.
func (t *Table) checkItem(i int, it *item) error {
	b := t.b
	if it.Len < 1 || it.Pad < 0 || int64(it.Len) > b.capacity || int64(it.Pad) > b.capacity-int64(it.Len) {
		return fmt.Errorf("slot %d: item of %d+%d steps, capacity %d", i, it.Len, it.Pad, b.capacity)
	}
	if it.Start < b.oldest(it.Row) || it.Start > b.cursor[it.Row]-int64(it.Len) {
		return fmt.Errorf("slot %d: item %+v outside row %d's steps [%d, %d)", i, it.Item, it.Row, b.oldest(it.Row), b.cursor[it.Row])
	}
	if !finiteNonNeg(it.Priority) {
		return fmt.Errorf("slot %d: priority %v", i, it.Priority)
	}
	if _, err := t.weight(it.Priority); err != nil {
		return fmt.Errorf("slot %d: %v", i, err)
	}
	if mts := t.cfg.MaxTimesSampled; mts > 0 && it.timesSampled >= mts {
		return fmt.Errorf("slot %d: sampled %d times, MaxTimesSampled %d", i, it.timesSampled, mts)
	}
	return nil
}

// checkTotals checks the table's saved counters against its items' tot:
// the item count against MaxSize, the sample budget, the longest item,
// and the insert, sample and priority counters.
func (t *Table) checkTotals(s *tableSnap, tot itemTotals) error {
	if t.cfg.MaxSize > 0 && tot.live > t.cfg.MaxSize {
		return fmt.Errorf("%d items, MaxSize %d", tot.live, t.cfg.MaxSize)
	}
	if s.budget != tot.budget {
		return fmt.Errorf("sample budget %d, the items leave %d", s.budget, tot.budget)
	}
	if s.maxLen < tot.maxLen || int64(s.maxLen) > t.b.capacity {
		return fmt.Errorf("longest item %d, items of %d steps, capacity %d", s.maxLen, tot.maxLen, t.b.capacity)
	}
	if s.inserts < 0 || s.samples < 0 || !finiteNonNeg(s.maxPriority) || (!s.hasMax && s.maxPriority != 0) {
		return fmt.Errorf("counters: %d inserts, %d samples, max priority %v", s.inserts, s.samples, s.maxPriority)
	}
	return nil
}

// indexLists checks that the live list, the insertion order and the
// start heaps hold nLive slots and the free list the others, and that the
// live and free lists each hold every slot of their kind exactly once;
// it sets each live item's pos (reset to -1 by checkItems, so a repeat
// is seen).
func (s *tableSnap) indexLists(nLive int) error {
	n := len(s.items)
	if len(s.live) != nLive || len(s.order) != nLive || len(s.free) != n-nLive || len(s.heap) != nLive {
		return fmt.Errorf("%d live items but %d in the live list, %d in insertion order, %d in heaps, and %d free of %d slots",
			nLive, len(s.live), len(s.order), len(s.heap), len(s.free), n)
	}
	for i, v := range s.live {
		it := &s.items[v]
		if !it.live || it.pos >= 0 {
			return fmt.Errorf("live list: slot %d repeated or not live", v)
		}
		it.pos = i
	}
	seenFree := make([]bool, n)
	for _, v := range s.free {
		if s.items[v].live || seenFree[v] {
			return fmt.Errorf("free list: slot %d repeated or live", v)
		}
		seenFree[v] = true
	}
	return nil
}

// linkOrder links the live items in insertion order (prev, next) and
// returns its first and last slot (-1 when there is none); a slot
// repeated or not live is refused (prev, reset to -1, marks the slots
// seen).
func (s *tableSnap) linkOrder() (head, tail int32, err error) {
	head, tail = -1, -1
	for i, v := range s.order {
		it := &s.items[v]
		if !it.live || it.prev != -1 || v == head {
			return -1, -1, fmt.Errorf("insertion order: slot %d repeated or not live", v)
		}
		if i == 0 {
			head = v
		} else {
			it.prev = tail
			s.items[tail].next = v
		}
		tail = v
	}
	if len(s.order) > 0 {
		s.items[head].prev = -1
	}
	return head, tail, nil
}

// startHeaps rebuilds the start heap of each of rows rows from s.heap,
// row after row, setting each item's hpos; a slot repeated, not live or
// of another row, or a heap out of order, is refused.
func (s *tableSnap) startHeaps(rows int) ([]startHeap, error) {
	starts := make([]startHeap, rows)
	k := 0
	for r, cnt := range s.heapLen {
		if cnt == 0 {
			continue
		}
		h := make(startHeap, cnt)
		for i := range h {
			v := s.heap[k]
			k++
			it := &s.items[v]
			if !it.live || it.hpos >= 0 || it.Row != r {
				return nil, fmt.Errorf("start heap of row %d: slot %d repeated, not live or of row %d", r, v, it.Row)
			}
			it.hpos = i
			h[i] = startEntry{start: it.Start, slot: v}
			if p := (i - 1) / 2; i > 0 && h[p].start > h[i].start {
				return nil, fmt.Errorf("start heap of row %d: not a heap at %d", r, i)
			}
		}
		starts[r] = h
	}
	return starts, nil
}

// installTreeLocked sets every live item's weight in a Prioritized
// table's sum tree and refuses a total past maxTreeTotal. The caller
// holds t.mu.
func (t *Table) installTreeLocked() error {
	if t.cfg.Selector != Prioritized || len(t.items) == 0 {
		return nil
	}
	t.tree.grow(len(t.items))
	total := 0.0
	for i := range t.items {
		if t.items[i].live {
			w, _ := t.weight(t.items[i].Priority)
			t.setWeight(int32(i), w)
			total += w
		}
	}
	if !(t.tree.total() <= maxTreeTotal) || math.IsInf(total, 0) {
		return fmt.Errorf("the sum of priority^%v exceeds %v", t.a, maxTreeTotal)
	}
	return nil
}

// drawsMagic starts a table's draw state in a checkpoint: the number of
// sample calls that drew (Table.calls), 8 bytes little-endian.
const drawsMagic = "phx:"

func marshalDraws(calls uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte(drawsMagic), calls)
}

// unmarshalDraws reads a table's draw state. A checkpoint written before
// tables drew from Philox holds a PCG state instead: it is accepted
// (every table section of that format is otherwise the same) and the
// table's draws start again from call 0.
func unmarshalDraws(b []byte) (uint64, error) {
	if len(b) == len(drawsMagic)+8 && string(b[:len(drawsMagic)]) == drawsMagic {
		return binary.LittleEndian.Uint64(b[len(drawsMagic):]), nil
	}
	if err := (&rand.PCG{}).UnmarshalBinary(b); err != nil {
		return 0, err
	}
	return 0, nil
}
