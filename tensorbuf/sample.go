package tensorbuf

import (
	"context"
	"fmt"
	"math"
)

// Sample returns n items selected by the table's selector, materialised
// as a Batch. See SampleInto.
func (t *Table) Sample(ctx context.Context, n int) (*Batch, error) {
	bt := new(Batch)
	if err := t.SampleInto(ctx, bt, n); err != nil {
		return nil, err
	}
	return bt, nil
}

// SampleInto selects n items, one after another as Reverb does (an item
// reaching MaxTimesSampled is removed before the next is selected), and
// gathers them into bt, reusing its memory. With a rate limiter it waits
// until the table can serve n samples, or until the context is done or
// the limiter's timeout passes; without one it fails with ErrEmpty
// (consuming nothing) when the table cannot serve n samples. A nil ctx or
// bt, n <= 0, or a batch whose size overflows is refused with
// ErrInvalidArg, consuming nothing. It is safe for concurrent use, on
// distinct batches.
func (t *Table) SampleInto(ctx context.Context, bt *Batch, n int) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArg)
	}
	if n <= 0 {
		return fmt.Errorf("%w: sample of %d items", ErrInvalidArg, n)
	}
	if bt == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidArg)
	}
	if err := t.checkBatch(n); err != nil {
		return err
	}
	for {
		if err := t.waitN(ctx, t.canSampleLocked, n); err != nil {
			return err
		}
		done, err := t.sampleOnce(bt, n)
		if done {
			return err
		}
	}
}

// sampleOnce samples if the table can still serve n samples; done is
// false when it no longer can and the caller must wait again.
func (t *Table) sampleOnce(bt *Batch, n int) (done bool, err error) {
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return true, fmt.Errorf("%w: Sample", ErrClosed)
	}
	t.mu.Lock()
	if !t.canSampleLocked(n) {
		t.mu.Unlock()
		return false, nil
	}
	all, _ := b.stepBytes()
	if err := b.checkSampleSize("table sample", "", int64(n), int64(t.maxLen), all+1); err != nil { // +1: the mask
		t.mu.Unlock()
		return true, err
	}
	realloc, err := b.prepare(bt, n, t.maxLen)
	if err != nil {
		t.mu.Unlock()
		return true, err
	}
	bt.TableSize = len(t.live)
	bt.Items, bt.Keys = bt.Items[:0], bt.Keys[:0]
	bt.Probabilities, bt.Weights = bt.Probabilities[:0], bt.Weights[:0]
	bt.wins = bt.wins[:0]
	l := 0
	t.selectLocked(n, func(it *item, p, w float64) {
		bt.Items = append(bt.Items, it.Item)
		bt.Keys = append(bt.Keys, it.key)
		bt.Probabilities = append(bt.Probabilities, p)
		bt.Weights = append(bt.Weights, w)
		bt.wins = append(bt.wins, Window{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len)})
		l = max(l, it.Len+it.Pad)
	})
	t.mu.Unlock()
	return true, b.gather(bt, n, l, realloc)
}

// selectLocked selects n items one after another, calling visit with each
// item, the probability with which it was selected and its importance
// weight, then counts the sample and removes the item if it has been
// sampled MaxTimesSampled times. The caller holds t.mu and has checked
// canSampleLocked(n).
func (t *Table) selectLocked(n int, visit func(it *item, p, w float64)) {
	// The importance weight (N*P(i))^-b / max_j (N*P(j))^-b is
	// (P(i)/P_min)^-b = (w_i/w_min)^-b, taken from the tree's weights
	// directly so that no probability can round to 0 on the way.
	wMin := 0.0
	if t.cfg.Selector == Prioritized && t.tree.total() > 0 {
		wMin = t.tree.minPositive()
	}
	if t.cfg.Selector == Prioritized && t.cfg.MaxTimesSampled == 0 && t.tree.total() > 0 {
		// Draws are independent (no item can leave mid-batch): descend the
		// sum tree for all of them at once.
		total := t.tree.total()
		us, slots := grow(&t.us, n), grow(&t.slots, n)
		for k := range us {
			us[k] = t.rng.Float64() * total
		}
		t.tree.findMany(us, slots)
		for _, s := range slots {
			it := &t.items[s]
			p := t.tree.get(int(s)) / total
			w := t.importance(int(s), wMin)
			visit(it, p, w)
			it.timesSampled++
		}
		t.samples += int64(n)
		t.notifyLocked()
		return
	}
	for range n {
		s, p := t.pick()
		it := &t.items[s]
		w := 1.0
		if t.cfg.Selector == Prioritized {
			w = t.importance(int(s), wMin)
		}
		visit(it, p, w)
		it.timesSampled++
		if t.cfg.MaxTimesSampled > 0 {
			t.budget--
			if it.timesSampled >= t.cfg.MaxTimesSampled {
				t.remove(s)
			}
		}
	}
	t.samples += int64(n)
	t.notifyLocked()
}

// importance returns the importance weight of a Prioritized slot, given
// the smallest positive weight of the table when it was drawn: in [0, 1],
// 1 without Beta.
func (t *Table) importance(s int, wMin float64) float64 {
	w := t.tree.get(s)
	if t.cfg.Beta == 0 || wMin <= 0 || w <= 0 {
		return 1
	}
	return math.Min(1, math.Pow(w/wMin, -t.cfg.Beta))
}

// checkWindows refuses a batch of n windows of l steps whose size in
// steps or bytes does not fit an int64, before anything is allocated or
// consumed.
func (b *Buffer) checkWindows(n, l int) error {
	if n <= 0 || l <= 0 {
		return nil
	}
	steps := int64(n) * int64(l) // n <= maxBatch and l <= capacity: no overflow in practice, checked below
	if steps/int64(l) != int64(n) {
		return fmt.Errorf("%w: %d windows of %d steps", ErrInvalidArg, n, l)
	}
	per := int64(1) + 8 // the mask, and alignment
	for i := range b.cols {
		per += b.cols[i].stepBytes + 8
	}
	if steps > math.MaxInt64/per {
		return fmt.Errorf("%w: %d windows of %d steps of %d bytes overflow", ErrInvalidArg, n, l, per)
	}
	return nil
}

// pick selects one live item and returns its slot and the probability
// with which it was selected.
func (t *Table) pick() (int32, float64) {
	switch t.cfg.Selector {
	case FIFO:
		return t.head, 1
	case LIFO:
		return t.tail, 1
	case Prioritized:
		if total := t.tree.total(); total > 0 {
			s := t.tree.find(t.rng.Float64() * total)
			return int32(s), t.tree.get(s) / total
		}
	}
	return t.live[t.rng.IntN(len(t.live))], 1 / float64(len(t.live))
}

// All returns every item of the table, oldest first, as a Batch (Reverb's
// table dump); it counts as no sample. An empty table gives ErrEmpty.
func (t *Table) All() (*Batch, error) {
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, fmt.Errorf("%w: All", ErrClosed)
	}
	t.mu.Lock()
	n := len(t.live)
	if n == 0 {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: table %q is empty", ErrEmpty, t.cfg.Name)
	}
	bt := new(Batch)
	bt.TableSize = n
	l := 0
	for s := t.head; s >= 0; s = t.items[s].next {
		it := &t.items[s]
		bt.Items = append(bt.Items, it.Item)
		bt.Keys = append(bt.Keys, it.key)
		bt.Probabilities = append(bt.Probabilities, 1)
		bt.Weights = append(bt.Weights, 1)
		bt.wins = append(bt.wins, Window{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len)})
		l = max(l, it.Len+it.Pad)
	}
	t.mu.Unlock()
	if err := b.checkWindows(n, l); err != nil {
		return nil, err
	}
	if _, err := b.prepare(bt, n, l); err != nil {
		return nil, err
	}
	if err := b.gather(bt, n, l, true); err != nil {
		_ = bt.Release()
		return nil, err
	}
	return bt, nil
}
