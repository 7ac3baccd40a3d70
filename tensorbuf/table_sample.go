package tensorbuf

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/internal/prefetch"
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
	return t.sampleInto(ctx, bt, n, nil)
}

// sampleInto is SampleInto stacking the fields of stack (see
// SampleStackedInto).
func (t *Table) sampleInto(ctx context.Context, bt *Batch, n int, stack []FrameStack) error {
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
	plan, err := t.b.stackPlan(stack, &bt.splan)
	if err != nil {
		return err
	}
	// Try first and wait only when the table cannot serve n samples yet:
	// the common call locks the table once, not twice (waitN, then
	// sampleOnce). A done context still fails first, as waitN would.
	if err := t.ctxErr(ctx); err != nil {
		return err
	}
	for {
		done, err := t.sampleOnce(bt, n, plan)
		if done {
			return err
		}
		if err := t.waitN(ctx, t.canSampleLocked, n); err != nil {
			return err
		}
	}
}

// sampleOnce samples if the table can still serve n samples, stacking
// the fields of plan (nil: none); done is false when it no longer can
// and the caller must wait again.
func (t *Table) sampleOnce(bt *Batch, n int, plan []int) (done bool, err error) {
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
	maxL, err := t.batchLen(bt)
	if err != nil {
		t.mu.Unlock()
		return true, err
	}
	if err := b.checkSampleSize("table sample", b.stackPart(plan), int64(n), int64(maxL), b.seqStepBytes(plan)); err != nil {
		t.mu.Unlock()
		return true, err
	}
	if t.dev != nil {
		if plan == nil {
			return true, t.sampleDevLocked(bt, n)
		}
		// Stacked frames are served by selecting on the host (see
		// SampleStackedInto), with the priorities the backend samples
		// with: those set by UpdatePrioritiesDevice are learned first.
		if err := t.learnLeavesLocked(); err != nil {
			t.mu.Unlock()
			return true, err
		}
	}
	realloc, err := b.preparePlan(bt, n, maxL, plan)
	if err != nil {
		t.mu.Unlock()
		return true, err
	}
	bt.retireMeta()
	bt.TableSize = len(t.live)
	l := t.selectLocked(n, selection{items: &bt.Items, keys: &bt.Keys, probs: &bt.Probabilities, weights: &bt.Weights, wins: &bt.wins})
	t.mu.Unlock()
	if bt.FixedLen > 0 {
		l = bt.FixedLen
	}
	return true, b.gather(bt, n, l, realloc)
}

// batchLen returns the L a sample into bt makes room for: the table's
// longest item, or bt.FixedLen when set, which must hold every item (a
// backend-selected sample's L is the longest item, so FixedLen must
// equal it there). The caller holds t.mu.
func (t *Table) batchLen(bt *Batch) (int, error) {
	switch {
	case bt.FixedLen < 0:
		return 0, fmt.Errorf("%w: batch FixedLen %d", ErrInvalidArg, bt.FixedLen)
	case bt.FixedLen == 0:
		return t.maxLen, nil
	case t.maxLen > bt.FixedLen:
		return 0, fmt.Errorf("%w: table %q holds items of up to %d steps, more than the batch's FixedLen %d",
			ErrInvalidArg, t.cfg.Name, t.maxLen, bt.FixedLen)
	case t.dev != nil && t.maxLen != bt.FixedLen:
		return 0, fmt.Errorf("%w: table %q selects on its backend, where L is its longest item (%d), not the batch's FixedLen %d",
			ErrInvalidArg, t.cfg.Name, t.maxLen, bt.FixedLen)
	}
	return bt.FixedLen, nil
}

// selection is where selectLocked writes its n draws, each slice grown
// to n and written by index; wins, when not nil, also receives each
// item's window.
type selection struct {
	items   *[]Item
	keys    *[]uint64
	probs   *[]float64
	weights *[]float64
	wins    *[]Window
}

// selectChunk is how many draws selectLocked prefetches ahead: the item
// records (and sum-tree weights) of the next chunk load while the current
// one is written out.
const selectChunk = 32

// selectLocked selects n items one after another, writes each item, the
// probability with which it was selected and its importance weight to
// out, then counts the sample and removes the item if it has been
// sampled MaxTimesSampled times. It returns the longest Len+Pad drawn.
// The caller holds t.mu and has checked canSampleLocked(n).
//
// Without MaxTimesSampled no item can leave mid-batch, so the draws are
// independent: all n are drawn first (in the same order from the same
// generator as one at a time), then the items are read with their records
// (a uniform table: their copies in live order, see hotItem) prefetched a
// chunk ahead and written straight into out, because a closure per item
// reading each record on its own stalled on every record's cache miss.
// Importance weights are computed after the descent
// for all draws at once (importance.many), from the weights held in the
// item records, which the descent has just brought into cache.
func (t *Table) selectLocked(n int, out selection) (maxLen int) {
	items, keys := grow(out.items, n), grow(out.keys, n)
	probs, weights := grow(out.probs, n), grow(out.weights, n)
	var wins []Window
	if out.wins != nil {
		wins = grow(out.wins, n)
	}
	// The importance weight (N*P(i))^-b / max_j (N*P(j))^-b is
	// (P(i)/P_min)^-b = (w_i/w_min)^-b, taken from the tree's weights
	// directly so that no probability can round to 0 on the way.
	prio := t.cfg.Selector == Prioritized
	total := 0.0
	if prio {
		total = t.tree.total()
	}
	imp := newImportance(0, 0)
	if prio && total > 0 {
		imp = newImportance(t.cfg.Beta, t.tree.minPositive())
	}
	put := func(k int, s int32, p, w float64) {
		it := &t.items[s]
		items[k], keys[k], probs[k], weights[k] = it.Item, it.key, p, w
		if wins != nil {
			wins[k] = Window{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len)}
		}
		maxLen = max(maxLen, it.Len+it.Pad)
		it.timesSampled++
	}
	if t.cfg.MaxTimesSampled == 0 && t.keepsHot() {
		call := t.calls
		t.calls++
		maxLen = t.selectHotLocked(call, grow(&t.slots, n), items, keys, probs, weights, wins)
		t.samples += int64(n)
		t.notifyLocked()
		return maxLen
	}
	if t.cfg.MaxTimesSampled == 0 && (prio && total > 0 || t.cfg.Selector == Uniform) {
		// A prioritized table, or a uniform one past hotMaxItems.
		slots := grow(&t.slots, n)
		call := t.calls
		t.calls++
		xs := grow(&t.xs, n)
		philox.Fill(xs, t.cfg.Seed, 0, call, 0)
		if prio {
			// Descend the sum tree for all draws at once.
			us := grow(&t.us, n)
			for k := range us {
				us[k] = philox.Float64(xs[k]) * total
			}
			t.tree.findMany(us, slots)
		} else {
			live := len(t.live)
			for k := range slots {
				slots[k] = int32(philox.Index(xs[k], uint64(live)))
			}
			t.prefetchLive(slots[:min(n, selectChunk)])
			for lo := 0; lo < n; lo += selectChunk {
				hi := min(lo+selectChunk, n)
				t.prefetchLive(slots[hi:min(hi+selectChunk, n)])
				for k := lo; k < hi; k++ {
					slots[k] = t.live[slots[k]]
				}
			}
		}
		p := 1 / float64(len(t.live))
		t.prefetchItems(slots[:min(n, selectChunk)])
		for lo := 0; lo < n; lo += selectChunk {
			hi := min(lo+selectChunk, n)
			t.prefetchItems(slots[hi:min(hi+selectChunk, n)])
			for k := lo; k < hi; k++ {
				s := slots[k]
				if !prio {
					put(k, s, p, 1)
					continue
				}
				w := t.items[s].w
				t.us[k] = w // findMany is done with us
				put(k, s, w/total, 0)
			}
		}
		if prio {
			imp.many(weights, t.us[:n])
		}
		t.samples += int64(n)
		t.notifyLocked()
		return maxLen
	}
	call := t.calls
	t.calls++
	for k := range n {
		s, p := t.pick(call, uint32(k))
		w := 1.0
		if prio {
			w = imp.of(t.items[s].w)
		}
		put(k, s, p, w)
		if t.cfg.MaxTimesSampled > 0 {
			t.budget--
			if t.items[s].timesSampled >= t.cfg.MaxTimesSampled {
				t.remove(s)
			}
		}
	}
	t.samples += int64(n)
	t.notifyLocked()
	return maxLen
}

// prefetchLive prefetches the entries of t.live at the indices idx.
func (t *Table) prefetchLive(idx []int32) {
	if len(idx) > 0 {
		prefetch.Rows32(unsafe.Pointer(unsafe.SliceData(t.live)), idx, 4)
	}
}

// itemSize is the bytes of one item record; a record's fields read by a
// sample (Item, key, timesSampled) span its first itemReadBytes.
const (
	itemSize      = int64(unsafe.Sizeof(item{}))
	itemReadBytes = int64(unsafe.Offsetof(item{}.timesSampled) + 8)
)

// prefetchItems prefetches the records of the items in slots (both cache
// lines where a record's read bytes straddle one).
func (t *Table) prefetchItems(slots []int32) {
	if len(slots) == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(t.items))
	prefetch.Rows32(base, slots, itemSize)
	prefetch.Rows32(unsafe.Add(base, itemReadBytes-1), slots, itemSize)
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

// pick selects one live item with draw k of call call and returns its
// slot and the probability with which it was selected.
func (t *Table) pick(call uint64, k uint32) (int32, float64) {
	switch t.cfg.Selector {
	case FIFO:
		return t.head, 1
	case LIFO:
		return t.tail, 1
	case MinHeap, MaxHeap:
		return t.heap.top(), 1
	case WithoutReplacement:
		return t.pickEpochLocked(call, k)
	case Prioritized:
		if total := t.tree.total(); total > 0 {
			s := t.tree.find(philox.Float64(philox.Draw(t.cfg.Seed, 0, call, k)) * total)
			return int32(s), t.items[s].w / total // the record's copy of the weight
		}
	}
	i := philox.Index(philox.Draw(t.cfg.Seed, 0, call, k), uint64(len(t.live)))
	return t.live[i], 1 / float64(len(t.live))
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
