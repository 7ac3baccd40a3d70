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
// (consuming nothing) when the table cannot serve n samples.
func (t *Table) SampleInto(ctx context.Context, bt *Batch, n int) error {
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
	pMin := 0.0
	if t.cfg.Selector == Prioritized && t.tree.total() > 0 {
		pMin = t.tree.minPositive() / t.tree.total()
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
			w := 1.0
			if t.cfg.Beta > 0 && pMin > 0 && p > 0 {
				w = math.Min(1, math.Pow(p/pMin, -t.cfg.Beta))
			}
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
		if t.cfg.Selector == Prioritized && t.cfg.Beta > 0 && pMin > 0 && p > 0 {
			w = math.Min(1, math.Pow(p/pMin, -t.cfg.Beta))
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
	if _, err := b.prepare(bt, n, l); err != nil {
		return nil, err
	}
	if err := b.gather(bt, n, l, true); err != nil {
		_ = bt.Release()
		return nil, err
	}
	return bt, nil
}
