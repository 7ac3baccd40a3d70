package tensorbuf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
	// NumGoals is k, in [1, MaxNumGoals]: relabeled experiences per
	// transition at episode end, or the her_ratio k/(k+1) at sample time.
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
	pcg   *rand.PCG // rng's source, for Save
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
	items                      []Item
	refs                       []stepRef
	which                      []int
	idx, lens                  []int64
	raw                        []byte
	goals                      []float64
	rew, disc, sums            []float32
	done                       []byte
	wins                       []Window
	goalCols                   []Column
	goalArena                  *goalScratch
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

// NewHindsight validates cfg and returns a relabeler over b. A Table that
// already holds items fails with ErrConfig: its relabeled items would be
// unknown to the new relabeler, which would sample them as the real
// transitions they relabel (restore a relabeler saved with Save through
// LoadHindsight instead). An unknown
// goal field fails with ErrUnknownField; a goal field that is not an
// observation, goal indices out of range, repeated or shared between the
// goals, goals of different sizes, no Reward or IsDone, NumGoals outside
// [1, MaxNumGoals], an unknown strategy or mode, a table of another
// buffer, one that limits inserts or one with RelabelAtSample fail with
// ErrConfig; a closed buffer fails with ErrClosed, as NewWriter and
// NewTable do. It is safe for concurrent use.
func NewHindsight(b *Buffer, cfg HindsightConfig) (*Hindsight, error) {
	return newHindsight(b, cfg, false)
}

// newHindsight is NewHindsight; restoring accepts a table with items.
func newHindsight(b *Buffer, cfg HindsightConfig, restoring bool) (*Hindsight, error) {
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
	case cfg.NumGoals < 1 || cfg.NumGoals > MaxNumGoals:
		return nil, fmt.Errorf("%w: NumGoals %d outside [1, %d]", ErrConfig, cfg.NumGoals, MaxNumGoals)
	case cfg.Strategy < GoalFinal || cfg.Strategy > GoalRandom:
		return nil, fmt.Errorf("%w: goal strategy %v", ErrConfig, cfg.Strategy)
	case cfg.Mode != RelabelAtEpisodeEnd && cfg.Mode != RelabelAtSample:
		return nil, fmt.Errorf("%w: relabel mode %d", ErrConfig, cfg.Mode)
	case math.IsNaN(cfg.Priority) || math.IsInf(cfg.Priority, 0) || cfg.Priority < 0:
		return nil, fmt.Errorf("%w: priority %v", ErrConfig, cfg.Priority)
	case cfg.NStep.Horizon < 0:
		return nil, fmt.Errorf("%w: n-step horizon %d", ErrConfig, cfg.NStep.Horizon)
	case len(cfg.NStep.Stack) > 0:
		return nil, fmt.Errorf("%w: hindsight relabeling does not stack frames (NStep.Stack)", ErrConfig)
	}
	if cfg.NStep.Horizon > 0 {
		if err := cfg.NStep.validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("%w: NewHindsight", ErrClosed)
	}
	if t := cfg.Table; t != nil {
		switch {
		case t.b != b:
			return nil, fmt.Errorf("%w: table %q belongs to another buffer", ErrConfig, t.cfg.Name)
		case cfg.Mode != RelabelAtEpisodeEnd:
			return nil, fmt.Errorf("%w: a hindsight table needs RelabelAtEpisodeEnd", ErrConfig)
		case t.cfg.RateLimiter != nil && t.cfg.RateLimiter.SamplesPerInsert > 0:
			return nil, fmt.Errorf("%w: table %q limits inserts", ErrConfig, t.cfg.Name)
		case !restoring && t.Size() > 0:
			return nil, fmt.Errorf("%w: table %q already holds %d items, unknown to a new relabeler (use LoadHindsight)", ErrConfig, t.cfg.Name, t.Size())
		}
	}
	cfg.AchievedGoal.Indices = slices.Clone(cfg.AchievedGoal.Indices)
	cfg.DesiredGoal.Indices = slices.Clone(cfg.DesiredGoal.Indices)
	pcg := rand.NewPCG(cfg.Seed, 0x68657220) // "her "
	hs := &Hindsight{
		b: b, cfg: cfg, ach: ach, des: des, priority: cfg.Priority,
		rng: rand.New(pcg), pcg: pcg,
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

// String returns the mode's name, "at-episode-end" or "at-sample".
func (m RelabelMode) String() string {
	switch m {
	case RelabelAtEpisodeEnd:
		return "at-episode-end"
	case RelabelAtSample:
		return "at-sample"
	}
	return fmt.Sprintf("RelabelMode(%d)", int(m))
}
