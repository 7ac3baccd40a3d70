package tensorbuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
)

// GoalStrategy chooses the goals that hindsight relabeling substitutes
// for a transition's desired goal (the strategies of the HER paper, of
// MATLAB's rlHindsightReplayMemory and of SB3's HerReplayBuffer). Goals
// are achieved goals read from stored observations; for the transition at
// step t of an episode whose last transition is at step e (its
// next_step_type is Last) and whose first step is s (the constants say
// which goals each takes). A plain value, safe to share.
type GoalStrategy int

// The goal strategies.
const (
	// GoalFinal takes the achieved goal of the episode's final
	// observation, step e+1.
	GoalFinal GoalStrategy = iota
	// GoalFuture takes the achieved goal of an observation drawn uniformly
	// from steps t+1 .. e+1: observed after the transition's own
	// observation, and inclusive of its next observation, as SB3 does, so
	// that at least the transition itself can be relabeled as a success.
	GoalFuture
	// GoalEpisode takes the achieved goal of an observation drawn
	// uniformly from steps s+1 .. e+1 of the same episode.
	GoalEpisode
	// GoalRandom takes the achieved goal of a step drawn uniformly from
	// every step stored in the buffer, any row.
	GoalRandom
)

// String returns the strategy's name, such as "future".
func (s GoalStrategy) String() string {
	switch s {
	case GoalFinal:
		return "final"
	case GoalFuture:
		return "future"
	case GoalEpisode:
		return "episode"
	case GoalRandom:
		return "random"
	}
	return fmt.Sprintf("GoalStrategy(%d)", int(s))
}

// RelabelMode says when relabeled experiences are made. A plain value,
// safe to share.
type RelabelMode int

// The relabel modes.
const (
	// RelabelAtEpisodeEnd makes relabeled experiences when an episode has
	// been stored (MATLAB's generateHindsightExperiences): Generate finds
	// every episode completed since its last call and makes, for each of
	// its transitions, NumGoals relabeled experiences (one for
	// GoalFinal, whose goals would all be equal). They are kept until the
	// ring overwrites their step, are sampled uniformly together with the
	// real transitions (each stored experience equally likely), enter the
	// configured table if any, and are exported by AllExperiences.
	RelabelAtEpisodeEnd RelabelMode = iota
	// RelabelAtSample stores nothing: each sampled transition has its goal
	// replaced with probability NumGoals/(NumGoals+1) (SB3's her_ratio
	// 1 - 1/(k+1), TorchRL's sampler), so that a batch holds on average k
	// relabeled transitions per real one. A transition whose episode has
	// not ended yet takes the newest stored step as its episode's end.
	RelabelAtSample
)

// GoalRef names the elements of an observation field that hold a goal:
// flat indices into one step of the field (row-major over its shape), as
// MATLAB's goal condition information names them. Plain data: safe to
// share while nobody modifies it.
type GoalRef struct {
	Field   string
	Indices []int
}

// HindsightConfig configures hindsight relabeling (see NewHindsight).
// NewHindsight keeps a copy; the Reward and IsDone functions are called
// under the relabeler's lock, one call at a time, so they need not be
// safe for concurrent use unless shared with other code.
type HindsightConfig struct {
	// AchievedGoal holds the goal an observation has reached (MATLAB's goal
	// measurement, SB3's achieved_goal); DesiredGoal the goal the agent
	// pursues. Both are observation fields, with the same number of
	// indices; in one field they must not share an index.
	AchievedGoal, DesiredGoal GoalRef
	// Reward returns the reward of a relabeled transition from the
	// achieved goal of its next observation and its substituted goal.
	// It is called on the host, one transition at a time, with slices it
	// must not keep.
	Reward func(achieved, desired []float64) float32
	// IsDone reports whether a relabeled transition terminates the episode
	// (IsDone Terminated, discount 0). When it returns false, a transition
	// that was Truncated stays Truncated (time limits do not depend on the
	// goal) and any other becomes Running, with discount 1 where the stored
	// discount was 0.
	IsDone func(achieved, desired []float64) bool
	// Strategy chooses the substituted goals.
	Strategy GoalStrategy
	// NumGoals is k, at least 1: relabeled experiences per transition at
	// episode end, or the her_ratio k/(k+1) at sample time.
	NumGoals int
	// Mode says when relabeling happens.
	Mode RelabelMode
	// NStep, when its Horizon is at least 1, makes every sample and export
	// of the relabeler n-step transitions (see NStepOptions), relabeled
	// ones summing the Reward of each step's achieved goal against the
	// substituted goal and stopping where IsDone holds. A zero Horizon
	// gives one-step transitions with the stored discounts.
	NStep NStepOptions
	// Table, optional and only with RelabelAtEpisodeEnd, receives every
	// real transition of a completed episode and every relabeled
	// experience as an item {Row, Start: t, Len: 2} with Priority, so that
	// a Prioritized table samples both by priority (MATLAB's
	// rlHindsightPrioritizedReplayMemory); sample it with SampleTable, and
	// update priorities with Table.UpdatePriorities and the returned keys.
	// Its rate limiter, if any, must not limit inserts (SamplesPerInsert
	// 0), since Generate inserts while holding the relabeler's lock.
	Table *Table
	// Priority is the priority of items entering Table; 0 means 1.
	Priority float64
	// Seed seeds the relabeler's random choices.
	Seed uint64
}

// goalCol is a validated GoalRef.
type goalCol struct {
	col     int // column index
	nextIdx int // index of the field's next-observation output spec
	idx     []int
	dtype   DType
	step    int64
}

// relabel is one stored relabeled experience: the transition at step t of
// row with a substituted goal, its reward and IsDone.
type relabel struct {
	t      int64
	goal   []float64
	reward float32
	done   uint8
	key    uint64 // item key in the table, 0 when none
}

type hsRow struct {
	scanned int64 // steps scanned by Generate
	epStart int64 // first step of the episode being scanned
	items   []relabel
	head    int // items[:head] are pruned
}

// Hindsight relabels the transitions of a Buffer with substituted goals
// (hindsight experience replay). It reads goals from the stored
// observations (gathering them from backend memory) and never writes the
// ring: relabeled experiences are the ring's transitions plus a goal,
// reward and IsDone kept on the host.
//
// A Hindsight is safe for concurrent use: its calls are serialised with
// each other, and run concurrently with writers and other samplers of the
// buffer. Lock order: Hindsight, then Buffer, then Table.
type Hindsight struct {
	b        *Buffer
	cfg      HindsightConfig
	ach, des goalCol
	priority float64

	mu    sync.Mutex
	rng   *rand.Rand
	rows  []hsRow
	byKey map[uint64]relabel
	sc    hsScratch
}

// hsScratch is memory reused by the relabeler's calls (under its lock).
type hsScratch struct {
	prefix, prefix1, relPrefix []int64
	rows                       []int
	steps                      []int64
	ov                         []*relabel
	rels                       []relabel
	refs                       []stepRef
	which                      []int
	idx, lens                  []int64
	raw                        []byte
	goals                      []float64
	rew, disc                  []float32
}

// HindsightTransitions are sampled or exported hindsight transitions: the
// Transitions (their Observation and NextObservation carry the substituted
// goals, Reward and IsDone the relabeled values) and, per transition,
// whether it was relabeled. SampleTable also sets the item keys, the
// probabilities with which they were selected and their importance
// weights. Not safe for concurrent use.
type HindsightTransitions struct {
	Transitions
	Relabeled     []bool
	Keys          []uint64
	Probabilities []float64
	Weights       []float64
}

// NewHindsight validates cfg and returns a relabeler over b. An unknown
// goal field fails with ErrUnknownField; a goal field that is not an
// observation, goal indices out of range, repeated or shared between the
// goals, goals of different sizes, no Reward or IsDone, NumGoals below 1,
// an unknown strategy or mode, a table of another buffer, one that limits
// inserts or one with RelabelAtSample fail with ErrConfig.
func NewHindsight(b *Buffer, cfg HindsightConfig) (*Hindsight, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil buffer", ErrConfig)
	}
	ach, err := b.goalCol(cfg.AchievedGoal)
	if err != nil {
		return nil, fmt.Errorf("achieved goal: %w", err)
	}
	des, err := b.goalCol(cfg.DesiredGoal)
	if err != nil {
		return nil, fmt.Errorf("desired goal: %w", err)
	}
	if len(ach.idx) != len(des.idx) {
		return nil, fmt.Errorf("%w: achieved goal of %d elements, desired goal of %d", ErrConfig, len(ach.idx), len(des.idx))
	}
	if ach.col == des.col {
		for _, i := range ach.idx {
			if slices.Contains(des.idx, i) {
				return nil, fmt.Errorf("%w: goals share element %d of %q", ErrConfig, i, cfg.DesiredGoal.Field)
			}
		}
	}
	switch {
	case cfg.Reward == nil || cfg.IsDone == nil:
		return nil, fmt.Errorf("%w: hindsight needs a Reward and an IsDone function", ErrConfig)
	case cfg.NumGoals < 1:
		return nil, fmt.Errorf("%w: NumGoals %d < 1", ErrConfig, cfg.NumGoals)
	case cfg.Strategy < GoalFinal || cfg.Strategy > GoalRandom:
		return nil, fmt.Errorf("%w: goal strategy %v", ErrConfig, cfg.Strategy)
	case cfg.Mode != RelabelAtEpisodeEnd && cfg.Mode != RelabelAtSample:
		return nil, fmt.Errorf("%w: relabel mode %d", ErrConfig, cfg.Mode)
	case math.IsNaN(cfg.Priority) || math.IsInf(cfg.Priority, 0) || cfg.Priority < 0:
		return nil, fmt.Errorf("%w: priority %v", ErrConfig, cfg.Priority)
	case cfg.NStep.Horizon < 0:
		return nil, fmt.Errorf("%w: n-step horizon %d", ErrConfig, cfg.NStep.Horizon)
	}
	if cfg.NStep.Horizon > 0 {
		if err := cfg.NStep.validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if t := cfg.Table; t != nil {
		switch {
		case t.b != b:
			return nil, fmt.Errorf("%w: table %q belongs to another buffer", ErrConfig, t.cfg.Name)
		case cfg.Mode != RelabelAtEpisodeEnd:
			return nil, fmt.Errorf("%w: a hindsight table needs RelabelAtEpisodeEnd", ErrConfig)
		case t.cfg.RateLimiter != nil && t.cfg.RateLimiter.SamplesPerInsert > 0:
			return nil, fmt.Errorf("%w: table %q limits inserts", ErrConfig, t.cfg.Name)
		}
	}
	cfg.AchievedGoal.Indices = slices.Clone(cfg.AchievedGoal.Indices)
	cfg.DesiredGoal.Indices = slices.Clone(cfg.DesiredGoal.Indices)
	hs := &Hindsight{
		b: b, cfg: cfg, ach: ach, des: des, priority: cfg.Priority,
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x68657220)), // "her "
		rows:  make([]hsRow, b.numEnvs),
		byKey: make(map[uint64]relabel),
	}
	if hs.priority == 0 {
		hs.priority = 1
	}
	return hs, nil
}

// goalCol validates a goal reference.
func (b *Buffer) goalCol(g GoalRef) (goalCol, error) {
	i, ok := b.byName[g.Field]
	if !ok || b.cols[i].builtin {
		return goalCol{}, fmt.Errorf("%w: %q", ErrUnknownField, g.Field)
	}
	c := &b.cols[i]
	if c.Role != Observation {
		return goalCol{}, fmt.Errorf("%w: goal field %q is an %v field, not an observation", ErrConfig, g.Field, c.Role)
	}
	if len(g.Indices) == 0 {
		return goalCol{}, fmt.Errorf("%w: goal in %q has no indices", ErrConfig, g.Field)
	}
	n := c.Elems()
	for k, e := range g.Indices {
		if e < 0 || e >= n {
			return goalCol{}, fmt.Errorf("%w: goal index %d outside field %q of %d elements", ErrConfig, e, g.Field, n)
		}
		if slices.Contains(g.Indices[:k], e) {
			return goalCol{}, fmt.Errorf("%w: goal index %d repeated", ErrConfig, e)
		}
	}
	next := b.nUser
	for j := range i {
		if b.cols[j].Role == Observation {
			next++
		}
	}
	return goalCol{col: i, nextIdx: next, idx: slices.Clone(g.Indices), dtype: c.DType, step: c.stepBytes}, nil
}

// Config returns the relabeler's configuration.
func (hs *Hindsight) Config() HindsightConfig {
	c := hs.cfg
	c.AchievedGoal.Indices = slices.Clone(c.AchievedGoal.Indices)
	c.DesiredGoal.Indices = slices.Clone(c.DesiredGoal.Indices)
	return c
}

// Stored returns the number of relabeled experiences held (always 0 with
// RelabelAtSample); experiences whose step the ring has overwritten are
// not counted.
func (hs *Hindsight) Stored() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.b.mu.RLock()
	defer hs.b.mu.RUnlock()
	hs.pruneLocked()
	n := 0
	for r := range hs.rows {
		n += len(hs.rows[r].items) - hs.rows[r].head
	}
	return n
}

// pruneLocked drops relabeled experiences whose step has been overwritten.
// The caller holds hs.mu and b.mu.
func (hs *Hindsight) pruneLocked() {
	for r := range hs.rows {
		row := &hs.rows[r]
		old := hs.b.oldest(r)
		for row.head < len(row.items) && row.items[row.head].t < old {
			if k := row.items[row.head].key; k != 0 {
				delete(hs.byKey, k)
			}
			row.items[row.head] = relabel{}
			row.head++
		}
		if row.head > 64 && row.head*2 > len(row.items) {
			row.items = append(row.items[:0], row.items[row.head:]...)
			row.head = 0
		}
	}
}

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
	goals, err := hs.achievedAt(refs)
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
// caller holds hs.mu and b.mu.
func (hs *Hindsight) achievedAt(refs []stepRef) (_ []float64, err error) {
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
	scratch, err := b.be.Alloc(step * int64(len(refs)))
	if err != nil {
		return nil, fmt.Errorf("%w: goal scratch: %w", ErrBackend, err)
	}
	defer func() {
		if ferr := b.be.Free(scratch); ferr != nil && err == nil {
			err = fmt.Errorf("%w: freeing goal scratch: %w", ErrBackend, ferr)
		}
	}()
	cols := []Column{{Ring: b.cols[hs.ach.col].arena, StepBytes: step, Out: scratch}}
	if err := b.be.GatherRows(cols, idx); err != nil {
		return nil, fmt.Errorf("%w: gather goals: %w", ErrBackend, err)
	}
	if err := b.be.Sync(); err != nil {
		return nil, fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	raw := grow(&hs.sc.raw, int(step)*len(refs))
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

// SampleInto samples n transitions uniformly into ht, reusing its memory.
// With RelabelAtEpisodeEnd every real transition and every stored
// relabeled experience is equally likely; with RelabelAtSample real
// transitions are drawn and each is relabeled with probability
// NumGoals/(NumGoals+1). It fails with ErrInvalidArg for n below 1 and
// ErrEmpty when there is nothing to sample.
func (hs *Hindsight) SampleInto(ht *HindsightTransitions, n int) error {
	if n <= 0 || ht == nil {
		return fmt.Errorf("%w: sample of %d transitions", ErrInvalidArg, n)
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
	if err := hs.materialise(ht, rows, steps, ov); err != nil {
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
	goals, err := hs.achievedAt(refs)
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
// configured.
func (hs *Hindsight) SampleTable(ctx context.Context, ht *HindsightTransitions, n int) error {
	t := hs.cfg.Table
	if t == nil {
		return fmt.Errorf("%w: no hindsight table", ErrConfig)
	}
	if n <= 0 || ht == nil {
		return fmt.Errorf("%w: sample of %d items", ErrInvalidArg, n)
	}
	if err := t.checkBatch(n); err != nil {
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
	ht.Keys, ht.Probabilities, ht.Weights = ht.Keys[:0], ht.Probabilities[:0], ht.Weights[:0]
	rows, steps, ov := hs.sc.rows[:0], hs.sc.steps[:0], hs.sc.ov[:0]
	defer func() { hs.sc.rows, hs.sc.steps, hs.sc.ov = rows, steps, ov }()
	t.selectLocked(n, func(it *item, p, w float64) {
		ht.Keys = append(ht.Keys, it.key)
		ht.Probabilities = append(ht.Probabilities, p)
		ht.Weights = append(ht.Weights, w)
		rows, steps = append(rows, it.Row), append(steps, it.Start)
		var rl *relabel
		if x, ok := hs.byKey[it.key]; ok {
			rl = &x // a copy: the table path allocates one per relabeled sample
		}
		ov = append(ov, rl)
	})
	t.mu.Unlock()
	if err := hs.materialise(ht, rows, steps, ov); err != nil {
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
	if err := hs.materialise(ht, rows, steps, ov); err != nil {
		return nil, nil, err
	}
	exp, err = b.exportViews(&ht.Transitions, mode)
	if err != nil {
		return nil, nil, err
	}
	return exp, ht.Relabeled, nil
}

// materialise gathers the transitions rows/steps (one-step, or n-step
// with cfg.NStep) into ht and writes the substituted goals, rewards,
// discounts and IsDone of those with an override. The caller holds hs.mu
// and b.mu.
func (hs *Hindsight) materialise(ht *HindsightTransitions, rows []int, steps []int64, ov []*relabel) error {
	b := hs.b
	tr := &ht.Transitions
	tr.Rows, tr.Steps = append(tr.Rows[:0], rows...), append(tr.Steps[:0], steps...)
	ht.Relabeled = ht.Relabeled[:0]
	some := false
	for _, rl := range ov {
		ht.Relabeled = append(ht.Relabeled, rl != nil)
		some = some || rl != nil
	}
	if hs.cfg.NStep.Horizon > 0 {
		return hs.materialiseNStep(ht, ov, some)
	}
	tr.idx, tr.next = tr.idx[:0], tr.next[:0]
	for i, r := range rows {
		tr.idx = append(tr.idx, b.slot(r, steps[i]))
		tr.next = append(tr.next, b.slot(r, steps[i]+1))
	}
	if err := b.materialise(tr); err != nil {
		return err
	}
	if !some {
		return nil
	}
	n := len(rows)
	rew, disc := grow(&hs.sc.rew, n), grow(&hs.sc.disc, n)
	if err := hs.download(tr, rew, disc); err != nil {
		return err
	}
	for i, rl := range ov {
		if rl == nil {
			continue
		}
		rew[i] = rl.reward
		tr.done[i] = rl.done
		switch {
		case rl.done == Terminated:
			disc[i] = 0
		case disc[i] == 0:
			disc[i] = 1
		}
	}
	return hs.patch(tr, ov, rew, disc)
}

// materialiseNStep is materialise for n-step transitions. A real one is
// the buffer's n-step transition (see NStepOptions); a relabeled one with
// goal g looks ahead the same k_env steps and sums, instead of the stored
// rewards, Reward(achieved(t+j+1), g) for j < k, stopping after the first
// step where IsDone(achieved(t+j+1), g) holds (then IsDone is Terminated
// and the discount 0); otherwise k = k_env, the discount is gamma^k and
// IsDone is Truncated if the k-th step was, Running if not.
func (hs *Hindsight) materialiseNStep(ht *HindsightTransitions, ov []*relabel, some bool) error {
	b, tr := hs.b, &ht.Transitions
	opt := hs.cfg.NStep
	h, gamma := int64(opt.Horizon), opt.DiscountFactor
	n := len(tr.Rows)
	lens := grow(&hs.sc.lens, n) // k_env per transition
	refs := hs.sc.refs[:0]
	for i, r := range tr.Rows {
		lens[i] = b.nstepLen(r, tr.Steps[i], h)
		if ov[i] != nil {
			for j := range lens[i] {
				refs = append(refs, stepRef{r, tr.Steps[i] + j + 1})
			}
		}
	}
	hs.sc.refs = refs
	goals, err := hs.achievedAt(refs)
	if err != nil {
		return err
	}
	d := len(hs.ach.idx)
	rew, disc := grow(&hs.sc.rew, n), grow(&hs.sc.disc, n)
	done := grow(&tr.done, n)
	wins := make([]Window, n)
	tr.idx, tr.next = tr.idx[:0], tr.next[:0]
	at := 0 // next goal in goals
	for i, r := range tr.Rows {
		t, k := tr.Steps[i], lens[i]
		wins[i] = Window{Row: int64(r), Start: t, Len: k}
		done[i] = b.isDone(r, t+k-1)
		if rl := ov[i]; rl != nil {
			sum, g, kEnv := 0.0, 1.0, k
			terminated := false
			for j := range kEnv {
				a := goals[(at+int(j))*d : (at+int(j)+1)*d]
				sum = float64(sum + float64(g*float64(hs.cfg.Reward(a, rl.goal))))
				g = float64(g * gamma)
				if hs.cfg.IsDone(a, rl.goal) {
					k, terminated = j+1, true
					break
				}
			}
			at += int(kEnv)
			rew[i] = float32(sum)
			switch {
			case terminated:
				done[i] = Terminated
			case done[i] != Truncated:
				done[i] = Running
			}
		}
		disc[i] = 0
		if done[i] != Terminated {
			g := 1.0
			for range k {
				g = float64(g * gamma)
			}
			disc[i] = float32(g)
		}
		wins[i].Len = k
		tr.idx = append(tr.idx, b.slot(r, t))
		tr.next = append(tr.next, b.slot(r, t+k))
	}
	done = append([]byte(nil), done...) // b.materialise rewrites tr.done
	if err := b.materialise(tr); err != nil {
		return err
	}
	tr.done = append(tr.done[:0], done...)
	o := tr.out
	k := b.nUser + tr.nObs
	if err := b.nstepRewards(o.arena, o.offs[k], wins, gamma); err != nil {
		return err
	}
	if some {
		// Relabeled sums replace the stored-reward sums.
		sums := make([]float32, n)
		if err := hs.download(tr, sums, nil); err != nil {
			return err
		}
		for i, rl := range ov {
			if rl == nil {
				rew[i] = sums[i]
			}
		}
		return hs.patch(tr, ov, rew, disc)
	}
	for _, up := range []struct {
		off int64
		raw []byte
	}{{o.offs[k+1], f32Raw(disc)}, {o.offs[k+2], tr.done}} {
		if err := b.be.Upload(o.arena, up.off, up.raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	return nil
}

// download reads the rewards and (when disc is not nil) the discounts of
// materialised transitions.
func (hs *Hindsight) download(tr *Transitions, rew, disc []float32) error {
	b, o := hs.b, tr.out
	k := b.nUser + tr.nObs
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	if err := b.be.Download(f32Raw(rew), o.arena, o.offs[k]); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	if disc == nil {
		return nil
	}
	if err := b.be.Download(f32Raw(disc), o.arena, o.offs[k+1]); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	return nil
}

// patch writes the substituted goals into the observation and next
// observation of the overridden transitions, and uploads rewards,
// discounts and tr.done for all of them.
func (hs *Hindsight) patch(tr *Transitions, ov []*relabel, rew, disc []float32) error {
	b, o := hs.b, tr.out
	n := int64(len(ov))
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	for _, spec := range []int{hs.des.col, hs.des.nextIdx} {
		raw := grow(&hs.sc.raw, int(n*hs.des.step))
		if err := b.be.Download(raw, o.arena, o.offs[spec]); err != nil {
			return fmt.Errorf("%w: download: %w", ErrBackend, err)
		}
		for i, rl := range ov {
			if rl != nil {
				writeElems(raw[int64(i)*hs.des.step:], hs.des.dtype, hs.des.idx, rl.goal)
			}
		}
		if err := b.be.Upload(o.arena, o.offs[spec], raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	k := b.nUser + tr.nObs
	for _, up := range []struct {
		off int64
		raw []byte
	}{{o.offs[k], f32Raw(rew)}, {o.offs[k+1], f32Raw(disc)}, {o.offs[k+2], tr.done}} {
		if err := b.be.Upload(o.arena, up.off, up.raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	return nil
}

// grow returns (*s)[:n], reallocating *s when it is too short.
func grow[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	*s = (*s)[:n]
	return *s
}

// readElems writes elements idx of one step of a field, as float64, to
// out.
func readElems(out []float64, raw []byte, dt DType, idx []int) {
	ne := binary.NativeEndian
	for j, e := range idx {
		switch dt {
		case Float32:
			out[j] = float64(math.Float32frombits(ne.Uint32(raw[4*e:])))
		case Float64:
			out[j] = math.Float64frombits(ne.Uint64(raw[8*e:]))
		case Int32:
			out[j] = float64(int32(ne.Uint32(raw[4*e:])))
		case Int64:
			out[j] = float64(int64(ne.Uint64(raw[8*e:])))
		case Uint8, Bool:
			out[j] = float64(raw[e])
		}
	}
}

// writeElems stores vals as elements idx of one step of a field.
func writeElems(raw []byte, dt DType, idx []int, vals []float64) {
	ne := binary.NativeEndian
	for j, e := range idx {
		v := vals[j]
		switch dt {
		case Float32:
			ne.PutUint32(raw[4*e:], math.Float32bits(float32(v)))
		case Float64:
			ne.PutUint64(raw[8*e:], math.Float64bits(v))
		case Int32:
			ne.PutUint32(raw[4*e:], uint32(int32(v)))
		case Int64:
			ne.PutUint64(raw[8*e:], uint64(int64(v)))
		case Uint8:
			raw[e] = uint8(v)
		case Bool:
			raw[e] = 0
			if v != 0 {
				raw[e] = 1
			}
		}
	}
}
