package tensorbuf

import (
	"context"
	"fmt"
	"sort"
)

// SampleInto samples n transitions uniformly into ht, reusing its memory.
// With RelabelAtEpisodeEnd every real transition and every stored
// relabeled experience is equally likely; with RelabelAtSample real
// transitions are drawn and each is relabeled with probability
// NumGoals/(NumGoals+1). It fails with ErrInvalidArg for n below 1 or a
// sample larger than the sample limit (see SampleBudget) and ErrEmpty when
// there is nothing to sample. With RelabelAtEpisodeEnd and one-step
// transitions it allocates nothing in steady state.
func (hs *Hindsight) SampleInto(ht *HindsightTransitions, n int) error {
	if n <= 0 || ht == nil {
		return fmt.Errorf("%w: sample of %d transitions", ErrInvalidArg, n)
	}
	if err := hs.checkSampleSize("hindsight sample", n); err != nil {
		return err
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	b := hs.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: hindsight sample", ErrClosed)
	}
	hs.pruneLocked()
	ov, rows, steps := hs.sc.ov[:0], hs.sc.rows[:0], hs.sc.steps[:0]
	prefix, total := b.windowCounts(&hs.sc.prefix, 2)
	var stored int64
	relPrefix := grow(&hs.sc.relPrefix, len(hs.rows))
	clear(relPrefix)
	if hs.cfg.Mode == RelabelAtEpisodeEnd {
		for r := range hs.rows {
			stored += int64(len(hs.rows[r].items) - hs.rows[r].head)
			relPrefix[r] = stored
		}
	}
	if total+stored == 0 {
		return fmt.Errorf("%w: no transition stored", ErrEmpty)
	}
	var valid []Window
	for range n {
		row, t, rl, ok := -1, int64(0), (*relabel)(nil), false
		for try := 0; try < maxRejections && !ok; try++ {
			u := hs.rng.Int64N(total + stored)
			if u >= total {
				row, rl = hs.storedAt(relPrefix, u-total)
				t, ok = rl.t, true
				break
			}
			r := sort.Search(len(prefix), func(i int) bool { return prefix[i] > u })
			before := int64(0)
			if r > 0 {
				before = prefix[r-1]
			}
			row, t = r, b.oldest(r)+u-before
			ok = !b.isBoundary(row, t)
		}
		if !ok {
			if valid == nil {
				valid = b.validStarts(2)
			}
			if len(valid) == 0 && stored == 0 {
				return fmt.Errorf("%w: the buffer holds only boundary steps", ErrEmpty)
			}
			if len(valid) == 0 {
				row, rl = hs.storedAt(relPrefix, hs.rng.Int64N(stored))
				t = rl.t
			} else {
				w := valid[hs.rng.IntN(len(valid))]
				row, t = int(w.Row), w.Start
			}
		}
		rows, steps, ov = append(rows, row), append(steps, t), append(ov, rl)
	}
	hs.sc.ov, hs.sc.rows, hs.sc.steps = ov, rows, steps
	if hs.cfg.Mode == RelabelAtSample {
		if err := hs.relabelAtSampleLocked(rows, steps, ov); err != nil {
			return err
		}
	}
	ht.Keys, ht.Probabilities, ht.Weights = ht.Keys[:0], ht.Probabilities[:0], ht.Weights[:0]
	if err := hs.materialise(ht, rows, steps, ov, true); err != nil {
		return err
	}
	return ht.views(b.be, 0, n)
}

// storedAt returns the i-th stored relabeled experience over rows.
func (hs *Hindsight) storedAt(relPrefix []int64, i int64) (int, *relabel) {
	r := sort.Search(len(relPrefix), func(k int) bool { return relPrefix[k] > i })
	before := int64(0)
	if r > 0 {
		before = relPrefix[r-1]
	}
	row := &hs.rows[r]
	return r, &row.items[row.head+int(i-before)]
}

// relabelAtSampleLocked relabels each drawn transition with probability
// k/(k+1), setting ov[i].
func (hs *Hindsight) relabelAtSampleLocked(rows []int, steps []int64, ov []*relabel) error {
	k := float64(hs.cfg.NumGoals)
	ratio := k / (k + 1)
	which, refs := hs.sc.which[:0], hs.sc.refs[:0]
	defer func() { hs.sc.which, hs.sc.refs = which, refs }()
	for i, r := range rows {
		if hs.rng.Float64() >= ratio {
			continue
		}
		t := steps[i]
		s, e := hs.b.episodeOf(r, t)
		sr, src := hs.goalSource(r, t, s, e)
		which = append(which, i)
		refs = append(refs, stepRef{r, t + 1}, stepRef{sr, src})
	}
	goals, err := hs.achievedAt(refs, true)
	if err != nil {
		return err
	}
	// ov points into rels: allocate it whole before taking addresses.
	if cap(hs.sc.rels) < len(which) {
		hs.sc.rels = make([]relabel, len(which))
	}
	rels := hs.sc.rels[:len(which)]
	d := len(hs.ach.idx)
	for j, i := range which {
		ach, goal := goals[2*j*d:(2*j+1)*d], goals[(2*j+1)*d:(2*j+2)*d]
		rels[j] = hs.relabelOne(rows[i], steps[i], ach, goal)
		ov[i] = &rels[j]
	}
	return nil
}

// SampleTable samples n items from the configured table by its selector
// (prioritized, for MATLAB's rlHindsightPrioritizedReplayMemory) into ht,
// with their keys, probabilities and importance weights, as Table.Sample
// selects them: real transitions as they are stored, relabeled ones with
// their goal, reward and IsDone. It waits for the table's rate limiter as
// Table.SampleInto does, and fails with ErrConfig when no table is
// configured, and with ErrInvalidArg for a nil ctx or ht, n below 1 or a
// sample larger than the sample limit (see SampleBudget). With one-step
// transitions it reuses ht's memory and allocates nothing in steady state.
func (hs *Hindsight) SampleTable(ctx context.Context, ht *HindsightTransitions, n int) error {
	t := hs.cfg.Table
	if t == nil {
		return fmt.Errorf("%w: no hindsight table", ErrConfig)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArg)
	}
	if n <= 0 || ht == nil {
		return fmt.Errorf("%w: sample of %d items", ErrInvalidArg, n)
	}
	if err := t.checkBatch(n); err != nil {
		return err
	}
	if err := hs.checkSampleSize("hindsight table sample", n); err != nil {
		return err
	}
	for {
		if err := t.waitN(ctx, t.canSampleLocked, n); err != nil {
			return err
		}
		done, err := hs.sampleTableOnce(ht, n)
		if done {
			return err
		}
	}
}

func (hs *Hindsight) sampleTableOnce(ht *HindsightTransitions, n int) (done bool, err error) {
	t, b := hs.cfg.Table, hs.b
	hs.mu.Lock()
	defer hs.mu.Unlock()
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return true, fmt.Errorf("%w: hindsight sample", ErrClosed)
	}
	t.mu.Lock()
	if !t.canSampleLocked(n) {
		t.mu.Unlock()
		return false, nil
	}
	rows, steps, ov := hs.sc.rows[:0], hs.sc.steps[:0], hs.sc.ov[:0]
	defer func() { hs.sc.rows, hs.sc.steps, hs.sc.ov = rows, steps, ov }()
	t.selectLocked(n, selection{items: &hs.sc.items, keys: &ht.Keys, probs: &ht.Probabilities, weights: &ht.Weights})
	// Copies of the relabeled experiences drawn: rels has room for all n,
	// so appending never moves the copies ov points to.
	rels := grow(&hs.sc.rels, n)[:0]
	for i, it := range hs.sc.items {
		rows, steps = append(rows, it.Row), append(steps, it.Start)
		var rl *relabel
		if x, ok := hs.byKey[ht.Keys[i]]; ok {
			rels = append(rels, x)
			rl = &rels[len(rels)-1]
		}
		ov = append(ov, rl)
	}
	t.mu.Unlock()
	if err := hs.materialise(ht, rows, steps, ov, true); err != nil {
		return true, err
	}
	return true, ht.views(b.be, 0, n)
}

// AllExperiences exports every real transition and every stored relabeled
// experience, as MATLAB's allExperiences does for hindsight memories:
// ordered by step, then row, each real transition followed by its
// relabeled experiences in the order they were made; relabeled[i] tells
// which is which. The layout follows mode as for Buffer.AllExperiences.
// With RelabelAtSample nothing relabeled is stored, so the export holds
// the real transitions only.
func (hs *Hindsight) AllExperiences(mode ExportMode) (exp []*Transitions, relabeled []bool, err error) {
	if mode < ExportNone || mode > ExportSequence {
		return nil, nil, fmt.Errorf("%w: export mode %d", ErrInvalidArg, mode)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	b := hs.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, nil, fmt.Errorf("%w: hindsight export", ErrClosed)
	}
	hs.pruneLocked()
	type entry struct {
		t   int64
		row int
		rl  *relabel
		seq int
	}
	var all []entry
	rr, rs := b.allTransitions()
	for i := range rr {
		all = append(all, entry{t: rs[i], row: rr[i], seq: -1})
	}
	for r := range hs.rows {
		row := &hs.rows[r]
		for i := row.head; i < len(row.items); i++ {
			all = append(all, entry{t: row.items[i].t, row: r, rl: &row.items[i], seq: i})
		}
	}
	if len(all) == 0 {
		return nil, nil, fmt.Errorf("%w: the buffer holds no transition", ErrEmpty)
	}
	sort.Slice(all, func(i, j int) bool {
		a, c := all[i], all[j]
		if a.t != c.t {
			return a.t < c.t
		}
		if a.row != c.row {
			return a.row < c.row
		}
		return a.seq < c.seq
	})
	rows := make([]int, len(all))
	steps := make([]int64, len(all))
	ov := make([]*relabel, len(all))
	for i, e := range all {
		rows[i], steps[i], ov[i] = e.row, e.t, e.rl
	}
	ht := new(HindsightTransitions)
	if err := hs.materialise(ht, rows, steps, ov, false); err != nil {
		return nil, nil, err
	}
	exp, err = b.exportViews(&ht.Transitions, mode)
	if err != nil {
		return nil, nil, err
	}
	return exp, ht.Relabeled, nil
}

// checkSampleSize refuses a sample of n transitions larger than the
// sample limit (see SampleBudget), counting the goals a sample may gather:
// two a transition relabeled at sample time, one a look-ahead step of a
// relabeled n-step transition.
func (hs *Hindsight) checkSampleSize(what string, n int) error {
	b := hs.b
	goalBytes := int64(len(hs.ach.idx))*8 + hs.ach.step + 24 // goal, raw step, ref and index
	if err := b.checkTransitionsSize(what, n, int64(hs.cfg.NStep.Horizon), 4+goalBytes); err != nil {
		return err
	}
	if hs.cfg.Mode == RelabelAtSample {
		return b.checkSampleSize(what, " goals", int64(n), 2, goalBytes)
	}
	return nil
}
