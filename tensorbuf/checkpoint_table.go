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
func (t *Table) install(s *tableSnap) error {
	b := t.b
	n := len(s.items)
	if len(s.gens) != n {
		return fmt.Errorf("%d generations for %d slots", len(s.gens), n)
	}
	if len(s.heapLen) != b.numEnvs {
		return fmt.Errorf("%d start heaps for %d rows", len(s.heapLen), b.numEnvs)
	}
	nLive := 0
	var budget int64
	maxLen := 0
	for i := range s.items {
		it := &s.items[i]
		if s.gens[i] == 0 {
			return fmt.Errorf("slot %d: generation 0", i)
		}
		it.key = uint64(s.gens[i])<<32 | uint64(i)
		it.pos, it.hpos, it.prev, it.next = -1, -1, -1, -1
		if !it.live {
			continue
		}
		nLive++
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
		if mts := t.cfg.MaxTimesSampled; mts > 0 {
			if it.timesSampled >= mts {
				return fmt.Errorf("slot %d: sampled %d times, MaxTimesSampled %d", i, it.timesSampled, mts)
			}
			budget += int64(mts - it.timesSampled)
		}
		maxLen = max(maxLen, it.Len+it.Pad)
	}
	if t.cfg.MaxSize > 0 && nLive > t.cfg.MaxSize {
		return fmt.Errorf("%d items, MaxSize %d", nLive, t.cfg.MaxSize)
	}
	if s.budget != budget {
		return fmt.Errorf("sample budget %d, the items leave %d", s.budget, budget)
	}
	if s.maxLen < maxLen || int64(s.maxLen) > b.capacity {
		return fmt.Errorf("longest item %d, items of %d steps, capacity %d", s.maxLen, maxLen, b.capacity)
	}
	if s.inserts < 0 || s.samples < 0 || !finiteNonNeg(s.maxPriority) || (!s.hasMax && s.maxPriority != 0) {
		return fmt.Errorf("counters: %d inserts, %d samples, max priority %v", s.inserts, s.samples, s.maxPriority)
	}
	if len(s.live) != nLive || len(s.order) != nLive || len(s.free) != n-nLive || len(s.heap) != nLive {
		return fmt.Errorf("%d live items but %d in the live list, %d in insertion order, %d in heaps, and %d free of %d slots",
			nLive, len(s.live), len(s.order), len(s.heap), len(s.free), n)
	}
	// Each list must hold every slot of its kind exactly once; pos, prev
	// and hpos (reset to -1 above) mark the slots seen.
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
	head, tail := int32(-1), int32(-1)
	for i, v := range s.order {
		it := &s.items[v]
		if !it.live || it.prev != -1 || v == head {
			return fmt.Errorf("insertion order: slot %d repeated or not live", v)
		}
		if i == 0 {
			head = v
		} else {
			it.prev = tail
			s.items[tail].next = v
		}
		tail = v
	}
	if nLive > 0 {
		s.items[head].prev = -1
	}
	starts := make([]startHeap, b.numEnvs)
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
				return fmt.Errorf("start heap of row %d: slot %d repeated, not live or of row %d", r, v, it.Row)
			}
			it.hpos = i
			h[i] = startEntry{start: it.Start, slot: v}
			if p := (i - 1) / 2; i > 0 && h[p].start > h[i].start {
				return fmt.Errorf("start heap of row %d: not a heap at %d", r, i)
			}
		}
		starts[r] = h
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	calls, err := unmarshalDraws(s.rng)
	if err != nil {
		return fmt.Errorf("rng: %v", err)
	}
	t.calls = calls
	t.items, t.gens, t.free, t.live = s.items, s.gens, s.free, s.live
	t.head, t.tail, t.starts = head, tail, starts
	t.nextKey, t.maxLen, t.budget, t.inserts, t.samples = s.nextKey, s.maxLen, s.budget, s.inserts, s.samples
	t.maxPriority, t.hasMaxPriority = s.maxPriority, s.hasMax
	t.orderRebuildLocked()
	if t.cfg.Selector == Prioritized && n > 0 {
		t.tree.grow(n)
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
