package tensorbuf

import "fmt"

// DefaultPriority, as an Item's Priority, asks the table for its default
// priority: the running maximum of the positive priorities it has been
// given (by Insert or UpdatePriorities), or 1 before it has been given
// any. So with TD errors around 0.01 new items get about 0.01, not 1. This
// is the prioritized experience replay paper's rule (new transitions get
// the maximum priority so that each is sampled at least once soon), as
// TorchRL's and Flashbax's prioritized buffers apply it. The maximum
// never decreases. Any other negative priority is invalid; a priority of
// 0 is an explicit 0. The observers insert their items with
// DefaultPriority unless given a priority. (The value follows the
// precedent of compress/flate's DefaultCompression.)
const DefaultPriority = -1.0

// defaultPriorityLocked is the running maximum (see DefaultPriority).
// The caller holds t.mu.
func (t *Table) defaultPriorityLocked() float64 {
	if !t.hasMaxPriority {
		return 1
	}
	return t.maxPriority
}

// notePriorityLocked raises the running maximum to p; a priority of 0
// leaves it (a default of 0 would keep new items from ever being drawn).
func (t *Table) notePriorityLocked(p float64) {
	if p > 0 && (!t.hasMaxPriority || p > t.maxPriority) {
		t.maxPriority, t.hasMaxPriority = p, true
	}
}

// MaxPriority returns the priority that an item inserted with
// DefaultPriority gets now. It is safe for concurrent use.
func (t *Table) MaxPriority() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.defaultPriorityLocked()
}

// UpdatePriorities32 is UpdatePriorities for float32 priorities (a
// learner's absolute TD errors, say); it converts them exactly and
// allocates nothing. It is safe for concurrent use.
func (t *Table) UpdatePriorities32(keys []uint64, priorities []float32) error {
	return updatePriorities(t, keys, priorities)
}

// updatePriorities checks every key and priority, then sets them all (or
// nothing: see UpdatePriorities), and raises the running maximum priority.
func updatePriorities[F float32 | float64](t *Table, keys []uint64, priorities []F) error {
	if len(keys) != len(priorities) {
		return fmt.Errorf("%w: %d keys, %d priorities", ErrInvalidArg, len(keys), len(priorities))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// The slots and weights found while checking are kept for setting,
	// so each key is looked up and each weight computed once.
	slots, ws := grow(&t.slots, len(keys)), grow(&t.ws, len(keys))
	for i, k := range keys {
		s, ok := t.lookup(k)
		if !ok {
			return fmt.Errorf("%w: %d", ErrUnknownKey, k)
		}
		p := float64(priorities[i])
		if !finiteNonNeg(p) {
			return fmt.Errorf("%w: priority %v", ErrInvalidArg, p)
		}
		w, err := t.weight(p)
		if err != nil {
			return err
		}
		slots[i], ws[i] = s, w
	}
	if t.cfg.Selector == Prioritized {
		// Set every leaf, then undo them all (in reverse, so that a key
		// given twice gets its first value back) if the total no longer
		// fits: the tree's sums are recomputed from the leaves, so the
		// undo restores it bit for bit.
		old := grow(&t.us, len(keys))
		for i, s := range slots {
			old[i] = t.tree.get(int(s))
			t.setWeight(s, ws[i])
		}
		if !t.fits(0) {
			for i := len(keys) - 1; i >= 0; i-- {
				t.setWeight(slots[i], old[i])
			}
			return fmt.Errorf("%w: %d priorities: the sum of priority^%v over the table would exceed %v",
				ErrInvalidArg, len(keys), t.a, maxTreeTotal)
		}
	}
	for i, s := range slots {
		p := float64(priorities[i])
		t.notePriorityLocked(p)
		t.items[s].Priority = p
		if t.dev != nil {
			t.dev.noteItem(s)
		}
	}
	t.orderUpdateLocked(slots)
	return nil
}
