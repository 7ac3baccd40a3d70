package tensorbuf

import "github.com/trajring/trajring/internal/philox"

// epochSel is the state of a WithoutReplacement table: the items of the
// current epoch not yet picked. Not safe for concurrent use: the table's
// mutex guards it.
//
// left starts as the live items in insertion order; a pick, or an item
// leaving the table, takes its entry out by moving the last entry into its
// place (as the table's live list does), so a pick is one draw and O(1).
type epochSel struct {
	left   []int32
	pos    []int32 // by slot: index in left, -1 when not in the epoch
	epochs uint64  // epochs begun
}

// insert notes a new item: it waits for the next epoch.
func (e *epochSel) insert(s int32) {
	e.pos = growSlots(e.pos, s)
	e.pos[s] = -1
}

// remove takes slot s out of the epoch (nothing when it is not in it).
func (e *epochSel) remove(s int32) {
	if int(s) >= len(e.pos) || e.pos[s] < 0 {
		return
	}
	i, n := e.pos[s], int32(len(e.left)-1)
	last := e.left[n]
	e.left[i] = last
	e.pos[last] = i
	e.left = e.left[:n]
	e.pos[s] = -1
}

// pickEpochLocked picks the item of draw k of call call of a
// WithoutReplacement table, beginning a new epoch when the current one
// has no item left, and returns its slot and the probability with which
// it was picked (1/m, m items left). The caller holds t.mu and the table
// holds an item.
func (t *Table) pickEpochLocked(call uint64, k uint32) (int32, float64) {
	e := t.epoch
	if len(e.left) == 0 {
		for s := t.head; s >= 0; s = t.items[s].next {
			e.pos[s] = int32(len(e.left))
			e.left = append(e.left, s)
		}
		e.epochs++
	}
	m := len(e.left)
	s := e.left[philox.Index(philox.Draw(t.cfg.Seed, 0, call, k), uint64(m))]
	e.remove(s)
	return s, 1 / float64(m)
}
