package tensorbuf

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
)

// episode is a stored episode's transitions: steps s..e of a row, e being
// the step whose next_step_type is Last.
type episode struct {
	row  int
	s, e int64
}

// stepRef is a stored step.
type stepRef struct {
	row int
	t   int64
}

// Generate makes the relabeled experiences of every episode completed
// since the last call (an episode is complete once its boundary step, the
// final observation, is stored), as MATLAB's generateHindsightExperiences
// does at episode end; call it after adding steps, for instance from an
// observer after each driver step. Episodes whose first steps were already
// overwritten are relabeled from their oldest stored step. It returns the
// number of experiences made. With RelabelAtSample it fails with
// ErrInvalidArg. With a Table, an item whose step the ring overwrites
// while Generate inserts is skipped; any other refused insert (a closed
// buffer) fails the call; the episodes it had scanned are then not scanned
// again, and their relabeled experiences may be only partly stored. A
// closed buffer serves nothing afterwards, so this loses nothing usable.
func (hs *Hindsight) Generate() (int, error) {
	if hs.cfg.Mode != RelabelAtEpisodeEnd {
		return 0, fmt.Errorf("%w: Generate with RelabelAtSample", ErrInvalidArg)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	b := hs.b
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return 0, fmt.Errorf("%w: Generate", ErrClosed)
	}
	hs.pruneLocked()
	eps, scanned, starts := hs.scanLocked()
	made, real, err := hs.relabelEpisodesLocked(eps)
	b.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	for r := range hs.rows {
		hs.rows[r].scanned, hs.rows[r].epStart = scanned[r], starts[r]
	}
	count := 0
	for i := range made {
		count += len(made[i])
	}
	if t := hs.cfg.Table; t != nil {
		// Insert under hs.mu, so that SampleTable never meets a relabeled
		// item it does not know. A step overwritten meanwhile fails with
		// ErrItem: its item would be gone at once anyway.
		for _, s := range real {
			if _, err := t.Insert(Item{Row: s.row, Start: s.t, Len: 2, Priority: hs.priority}); err != nil && !errors.Is(err, ErrItem) {
				return 0, err
			}
		}
		for r := range made {
			for i := range made[r] {
				key, err := t.Insert(Item{Row: r, Start: made[r][i].t, Len: 2, Priority: hs.priority})
				if err != nil {
					if errors.Is(err, ErrItem) {
						continue
					}
					return 0, err
				}
				made[r][i].key = key
				hs.byKey[key] = made[r][i]
			}
		}
	}
	for r := range made {
		hs.rows[r].items = append(hs.rows[r].items, made[r]...)
	}
	return count, nil
}

// scanLocked finds the episodes completed since the last scan, and the
// scan state to keep if the call succeeds.
func (hs *Hindsight) scanLocked() (eps []episode, scanned, starts []int64) {
	b := hs.b
	scanned, starts = make([]int64, b.numEnvs), make([]int64, b.numEnvs)
	for r := range hs.rows {
		old := b.oldest(r)
		t, start := hs.rows[r].scanned, hs.rows[r].epStart
		if t < old {
			t, start = old, old
		}
		for ; t+1 < b.cursor[r]; t++ {
			m := b.metaAt(r, t)
			if m&metaCut != 0 {
				// Step t+1 does not continue t: the episode holding t never
				// completes here (its final observation was not stored).
				start = t + 1
				continue
			}
			switch StepType(m & metaStepMask) {
			case Last:
				start = t + 1
				continue
			case First:
				// Also after a reset that cut the previous episode short
				// (no boundary step): that episode never completes.
				start = t
			}
			if StepType((m&metaNextMask)>>metaNextShift) == Last {
				eps = append(eps, episode{row: r, s: max(start, old), e: t})
			}
		}
		scanned[r], starts[r] = t, start
	}
	return eps, scanned, starts
}

// relabelEpisodesLocked makes the relabeled experiences of eps, per row,
// and lists their real transitions.
func (hs *Hindsight) relabelEpisodesLocked(eps []episode) (made [][]relabel, real []stepRef, err error) {
	made = make([][]relabel, hs.b.numEnvs)
	if len(eps) == 0 {
		return made, nil, nil
	}
	// Goal sources per relabeled experience, then one gather of the
	// achieved goals of every next observation and source.
	type pending struct {
		row    int
		t, src int64
		srcRow int
	}
	var ps []pending
	per := hs.cfg.NumGoals
	if hs.cfg.Strategy == GoalFinal {
		per = 1
	}
	for _, ep := range eps {
		for t := ep.s; t <= ep.e; t++ {
			if hs.b.isBoundary(ep.row, t) {
				continue
			}
			real = append(real, stepRef{ep.row, t})
			for range per {
				row, src := hs.goalSource(ep.row, t, ep.s, ep.e)
				ps = append(ps, pending{row: ep.row, t: t, src: src, srcRow: row})
			}
		}
	}
	refs := make([]stepRef, 0, 2*len(ps))
	for _, p := range ps {
		refs = append(refs, stepRef{p.row, p.t + 1}, stepRef{p.srcRow, p.src})
	}
	goals, err := hs.achievedAt(refs, false)
	if err != nil {
		return nil, nil, err
	}
	goals = slices.Clone(goals) // the stored goals keep this copy
	d := len(hs.ach.idx)
	for i, p := range ps {
		ach, goal := goals[2*i*d:(2*i+1)*d:(2*i+1)*d], goals[(2*i+1)*d:(2*i+2)*d:(2*i+2)*d]
		made[p.row] = append(made[p.row], hs.relabelOne(p.row, p.t, ach, goal))
	}
	return made, real, nil
}

// relabelOne computes the relabeled experience of the transition at t of
// row with substituted goal goal, ach being its next observation's
// achieved goal.
func (hs *Hindsight) relabelOne(row int, t int64, ach, goal []float64) relabel {
	rl := relabel{t: t, goal: goal, reward: hs.cfg.Reward(ach, goal)}
	switch {
	case hs.cfg.IsDone(ach, goal):
		rl.done = Terminated
	case hs.b.isDone(row, t) == Truncated:
		rl.done = Truncated
	default:
		rl.done = Running
	}
	return rl
}

// goalSource draws the step whose achieved goal relabels the transition at
// t of row, in the episode of transitions s..e. The caller holds hs.mu and
// b.mu.
func (hs *Hindsight) goalSource(row int, t, s, e int64) (int, int64) {
	switch hs.cfg.Strategy {
	case GoalFinal:
		return row, e + 1
	case GoalFuture:
		return row, t + 1 + hs.rng.Int64N(e-t+1)
	case GoalEpisode:
		return row, s + 1 + hs.rng.Int64N(e-s+1)
	}
	prefix, total := hs.b.windowCounts(&hs.sc.prefix1, 1)
	u := hs.rng.Int64N(total)
	r := sort.Search(len(prefix), func(i int) bool { return prefix[i] > u })
	before := int64(0)
	if r > 0 {
		before = prefix[r-1]
	}
	return r, hs.b.oldest(r) + u - before
}

// episodeOf returns the first step and the last transition of the episode
// holding the transition at t of row; an episode still running ends at
// the newest transition, and one cut short by a reset (a First step with
// no boundary step before it) at the transition before the cut. The
// caller holds b.mu.
func (b *Buffer) episodeOf(row int, t int64) (s, e int64) {
	old := b.oldest(row)
	for s = t; s > old && StepType(b.metaAt(row, s)&metaStepMask) != First && !b.isBoundary(row, s-1); s-- {
	}
	for e = t; e+2 < b.cursor[row]; e++ {
		if StepType((b.metaAt(row, e)&metaNextMask)>>metaNextShift) == Last || b.isBoundary(row, e+1) {
			break
		}
	}
	return s, e
}

// achievedAt gathers the steps refs of the achieved-goal field from
// backend memory and returns their goals, goal i at [i*d, (i+1)*d) for
// goals of d elements, in scratch memory valid until the next call. The
// gather goes through a backend scratch arena: the relabeler's own, kept
// for the next call, when keep is set (samples: so that their steady state
// allocates nothing) or it is large enough; otherwise (Generate, whose
// batches of episodes can be far larger than a sample) one allocated and
// freed here. The caller holds hs.mu and b.mu.
func (hs *Hindsight) achievedAt(refs []stepRef, keep bool) (_ []float64, err error) {
	b := hs.b
	if len(refs) == 0 {
		return nil, nil
	}
	step := hs.ach.step
	idx := hs.sc.idx[:0]
	for _, s := range refs {
		idx = append(idx, b.slot(s.row, s.t))
	}
	hs.sc.idx = idx
	size := step * int64(len(refs))
	var scratch Arena
	switch g := hs.sc.goalArena; {
	case g != nil && g.size >= size:
		scratch = g.arena
	case keep:
		if scratch, err = hs.growGoalArena(size); err != nil {
			return nil, err
		}
	default:
		if scratch, err = b.be.Alloc(size); err != nil {
			return nil, fmt.Errorf("%w: goal scratch: %w", ErrBackend, err)
		}
		defer func() {
			if ferr := b.be.Free(scratch); ferr != nil && err == nil {
				err = fmt.Errorf("%w: freeing goal scratch: %w", ErrBackend, ferr)
			}
		}()
	}
	goal := b.ring[hs.ach.col]
	goal.Out = scratch
	cols := append(hs.sc.goalCols[:0], goal)
	hs.sc.goalCols = cols
	if err := b.be.GatherRows(cols, idx); err != nil {
		return nil, fmt.Errorf("%w: gather goals: %w", ErrBackend, err)
	}
	if err := b.be.Sync(); err != nil {
		return nil, fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	raw := grow(&hs.sc.raw, int(size))
	if err := b.be.Download(raw, scratch, 0); err != nil {
		return nil, fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	d := len(hs.ach.idx)
	out := grow(&hs.sc.goals, d*len(refs))
	for i := range refs {
		readElems(out[i*d:(i+1)*d], raw[int64(i)*step:], hs.ach.dtype, hs.ach.idx)
	}
	return out, nil
}

// goalScratch is the backend arena a relabeler's samples gather goals
// into, kept between calls. It holds no reference to its Hindsight, so
// that a cleanup can free it once the Hindsight is unreachable.
type goalScratch struct {
	be    Backend
	arena Arena
	size  int64
}

// growGoalArena replaces the relabeler's goal scratch with one of at
// least size bytes. The caller holds hs.mu.
func (hs *Hindsight) growGoalArena(size int64) (Arena, error) {
	g := hs.sc.goalArena
	if g == nil {
		g = &goalScratch{be: hs.b.be}
		hs.sc.goalArena = g
		runtime.AddCleanup(hs, func(g *goalScratch) {
			if g.arena != nil {
				_ = g.be.Free(g.arena) // nobody to report to
			}
		}, g)
	}
	size = max(size, 2*g.size) // amortise growth
	a, err := g.be.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("%w: goal scratch: %w", ErrBackend, err)
	}
	if g.arena != nil {
		if err := g.be.Free(g.arena); err != nil {
			_ = g.be.Free(a)
			return nil, fmt.Errorf("%w: freeing goal scratch: %w", ErrBackend, err)
		}
	}
	g.arena, g.size = a, size
	return a, nil
}
