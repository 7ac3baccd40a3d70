package tensorbuf

// startEntry is a live item in its row's eviction heap.
type startEntry struct {
	start int64
	slot  int32
}

// startHeap is a binary min-heap, by start, of the live items of a row
// (hand-written rather than container/heap, whose interface boxes every
// pushed entry). Every item keeps its index in the heap (item.hpos), so a
// removed item leaves the heap at once and the heap never holds more
// entries than the row has live items; its backing array shrinks when it
// is mostly empty.
type startHeap []startEntry

func (h startHeap) swap(items []item, i, j int) {
	h[i], h[j] = h[j], h[i]
	items[h[i].slot].hpos = i
	items[h[j].slot].hpos = j
}

func (h startHeap) up(items []item, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].start <= h[i].start {
			return
		}
		h.swap(items, p, i)
		i = p
	}
}

func (h startHeap) down(items []item, i int) {
	n := len(h)
	for {
		l, m := 2*i+1, i
		if l < n && h[l].start < h[m].start {
			m = l
		}
		if l+1 < n && h[l+1].start < h[m].start {
			m = l + 1
		}
		if m == i {
			return
		}
		h.swap(items, i, m)
		i = m
	}
}

func (h *startHeap) push(items []item, e startEntry) {
	*h = append(*h, e)
	i := len(*h) - 1
	items[e.slot].hpos = i
	h.up(items, i)
}

// removeAt takes entry i out of the heap.
func (h *startHeap) removeAt(items []item, i int) {
	a := *h
	n := len(a) - 1
	if i != n {
		a.swap(items, i, n)
	}
	a = a[:n]
	if i < n {
		a.down(items, i)
		a.up(items, i)
	}
	if c := cap(a); c > 64 && n < c/4 {
		a = append(make(startHeap, 0, 2*n), a...)
	}
	*h = a
}
