package tensorbuf

// prioHeap orders the live items of a MinHeap or MaxHeap table: a binary
// heap of (priority, tick) pairs whose top is the item to pick, where tick
// counts the inserts and priority updates before the item's last one, so
// that of equal priorities the least recently inserted or updated item
// comes first (Reverb's HeapSelector breaks ties the same way). It is
// hand-written, as startHeap is, and keeps each slot's index (pos) so that
// a removed or updated item is found at once. Not safe for concurrent use:
// the table's mutex guards it.
type prioHeap struct {
	max  bool        // MaxHeap: the highest priority on top
	es   []heapEntry // the heap
	pos  []int32     // by slot: index in es, -1 when the slot is not held
	tick uint64      // inserts and updates so far
}

type heapEntry struct {
	p    float64
	tick uint64
	slot int32
}

// before reports whether entry a goes above entry b.
func (h *prioHeap) before(a, b *heapEntry) bool {
	if a.p != b.p {
		if h.max {
			return a.p > b.p
		}
		return a.p < b.p
	}
	return a.tick < b.tick
}

func (h *prioHeap) swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.pos[h.es[i].slot] = int32(i)
	h.pos[h.es[j].slot] = int32(j)
}

func (h *prioHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.before(&h.es[i], &h.es[p]) {
			return
		}
		h.swap(p, i)
		i = p
	}
}

func (h *prioHeap) down(i int) {
	n := len(h.es)
	for {
		l, m := 2*i+1, i
		if l < n && h.before(&h.es[l], &h.es[m]) {
			m = l
		}
		if l+1 < n && h.before(&h.es[l+1], &h.es[m]) {
			m = l + 1
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// push adds slot s with priority p, as the most recent insert.
func (h *prioHeap) push(s int32, p float64) {
	h.pos = growSlots(h.pos, s)
	h.es = append(h.es, heapEntry{p: p, tick: h.tick, slot: s})
	h.tick++
	i := len(h.es) - 1
	h.pos[s] = int32(i)
	h.up(i)
}

// remove takes slot s out of the heap (nothing when it is not held).
func (h *prioHeap) remove(s int32) {
	if int(s) >= len(h.pos) || h.pos[s] < 0 {
		return
	}
	i, n := int(h.pos[s]), len(h.es)-1
	if i != n {
		h.swap(i, n)
	}
	h.es = h.es[:n]
	h.pos[s] = -1
	if i < n {
		h.down(i)
		h.up(i)
	}
}

// update gives slot s priority p, as the most recent update.
func (h *prioHeap) update(s int32, p float64) {
	if int(s) >= len(h.pos) || h.pos[s] < 0 {
		return
	}
	i := int(h.pos[s])
	h.es[i].p, h.es[i].tick = p, h.tick
	h.tick++
	h.down(i)
	h.up(i)
}

// top returns the slot on top; the heap must not be empty.
func (h *prioHeap) top() int32 { return h.es[0].slot }

// growSlots extends a by-slot index to hold slot s, new entries -1.
func growSlots(pos []int32, s int32) []int32 {
	for int(s) >= len(pos) {
		pos = append(pos, -1)
	}
	return pos
}

// newOrderLocked creates the state of a MinHeap, MaxHeap or
// WithoutReplacement table (NewTable).
func (t *Table) newOrderLocked() {
	switch t.cfg.Selector {
	case MinHeap, MaxHeap:
		t.heap = &prioHeap{max: t.cfg.Selector == MaxHeap}
	case WithoutReplacement:
		t.epoch = &epochSel{}
	}
}

// orderInsertLocked adds a newly inserted live item to the selector's
// order. The caller holds t.mu.
func (t *Table) orderInsertLocked(s int32) {
	switch {
	case t.heap != nil:
		t.heap.push(s, t.items[s].Priority)
	case t.epoch != nil:
		t.epoch.insert(s)
	}
}

// orderRemoveLocked takes an item leaving the table out of the
// selector's order. The caller holds t.mu.
func (t *Table) orderRemoveLocked(s int32) {
	switch {
	case t.heap != nil:
		t.heap.remove(s)
	case t.epoch != nil:
		t.epoch.remove(s)
	}
}

// orderUpdateLocked moves items whose priorities UpdatePriorities set,
// in the order given. The caller holds t.mu.
func (t *Table) orderUpdateLocked(slots []int32) {
	if t.heap == nil {
		return
	}
	for _, s := range slots {
		t.heap.update(s, t.items[s].Priority)
	}
}

// orderRebuildLocked rebuilds the selector's order from the live items
// (a loaded checkpoint): a heap pushes them in insertion order, so that
// equal priorities are broken by insertion; an epoch starts afresh. The
// caller holds t.mu.
func (t *Table) orderRebuildLocked() {
	t.newOrderLocked()
	for s := t.head; s >= 0; s = t.items[s].next {
		t.orderInsertLocked(s)
	}
}
