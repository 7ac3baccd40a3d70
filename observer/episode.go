package observer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// AddEpisodeConfig configures an AddEpisode observer (the arguments of
// TF-Agents' ReverbAddEpisodeObserver). The constructor copies what it
// needs.
type AddEpisodeConfig struct {
	// Tables names the tables that receive every episode (at least one).
	Tables []string
	// MaxSequenceLength bounds the steps of an episode, its boundary step
	// included: 1 to the buffer's capacity.
	MaxSequenceLength int
	// Priority is the priority of new items; 0 means the table's default
	// (tensorbuf.DefaultPriority: its running maximum priority, 1 on a
	// fresh table, as TF-Agents' default of 1). SetPriority changes it, to 0 as well.
	Priority float64
	// BypassPartialEpisodes makes an episode longer than
	// MaxSequenceLength be skipped silently (counted in
	// Stats.SkippedEpisodes) instead of reported with ErrEpisodeTooLong.
	BypassPartialEpisodes bool
	// Rows, Context and DataSpec are as in SequenceConfig.
	Rows     []int
	Context  context.Context
	DataSpec []tensorbuf.Field
}

// AddEpisode writes every observed step into a buffer and creates one item
// per complete episode of an env row, from its first step through its
// boundary step, as TF-Agents' ReverbAddEpisodeObserver does, but for
// batched trajectories: each row has its own episode cache. Items have
// varying lengths; a sample pads the shorter ones to the longest of the
// batch.
//
// An episode with more than MaxSequenceLength steps is not written: its
// row stops writing at the step that would exceed the maximum and drops
// the episode at its boundary step; the next episode starts afresh. The
// step that overflows makes Observe return an error wrapping
// ErrEpisodeTooLong and a *driver.RowError naming the batch row (after
// writing the other rows' steps normally), unless
// BypassPartialEpisodes is set.
//
// Rows are owned as for TrajectorySequence. An AddEpisode is safe for
// concurrent use; its calls are serialised.
type AddEpisode struct {
	mu       *sync.Mutex // the group's for a member of a Shared group
	c        *core
	tables   []*tensorbuf.Table
	max      int64
	bypass   bool
	priority float64
	cached   []int64
	overflow []bool
	fresh    []int // scratch: batch rows overflowing at this step
}

// NewAddEpisode returns an open AddEpisode observer writing into buf. It
// fails with ErrConfig for an invalid configuration (unknown or repeated
// table, MaxSequenceLength not positive or above the buffer's capacity,
// negative priority, bad rows), or with tensorbuf.ErrRowOwned when another
// writer owns one of its rows.
func NewAddEpisode(buf *tensorbuf.Buffer, cfg AddEpisodeConfig) (*AddEpisode, error) {
	return newAddEpisode(buf, cfg, nil)
}

func newAddEpisode(buf *tensorbuf.Buffer, cfg AddEpisodeConfig, grp *Shared) (*AddEpisode, error) {
	const kind = "AddEpisode"
	tables, err := checkTables(kind, buf, cfg.Tables)
	if err != nil {
		return nil, err
	}
	if err := checkLength(kind, "max sequence length", buf, cfg.MaxSequenceLength); err != nil {
		return nil, err
	}
	p, err := checkPriority(kind, cfg.Priority)
	if err != nil {
		return nil, err
	}
	c, err := newCore(kind, buf, cfg.Rows, cfg.Context, cfg.DataSpec, grp)
	if err != nil {
		return nil, err
	}
	o := &AddEpisode{
		mu:       new(sync.Mutex),
		c:        c,
		tables:   tables,
		max:      int64(cfg.MaxSequenceLength),
		bypass:   cfg.BypassPartialEpisodes,
		priority: p,
		cached:   make([]int64, len(c.rows)),
		overflow: make([]bool, len(c.rows)),
	}
	if grp != nil {
		o.mu = &grp.mu
		grp.add(o)
	}
	return o, nil
}

// Observe writes one batched trajectory step and, for every row whose step
// is a boundary, inserts the row's episode. A malformed trajectory changes
// nothing. Errors wrapping ErrEpisodeTooLong or ErrInsert are reported
// after the step has been processed; the observer stays usable.
func (o *AddEpisode) Observe(t *driver.Trajectory) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return observeAlone(o, t)
}

// The member methods (see member).
func (o *AddEpisode) base() *core { return o.c }

// prepare notes the rows whose episode overflows at this step.
func (o *AddEpisode) prepare(t *driver.Trajectory) {
	o.fresh = o.fresh[:0]
	for i := range o.cached {
		if t.IsActive(i) && !o.overflow[i] && o.cached[i] >= o.max {
			o.fresh = append(o.fresh, i)
		}
	}
}

// keep is the rows a lone AddEpisode writes: not those of an overflowing
// episode.
func (o *AddEpisode) keep() func(int) bool {
	return func(i int) bool { return !o.overflow[i] && !(o.cached[i] >= o.max) }
}

func (o *AddEpisode) clearCaches() {
	clear(o.cached)
	clear(o.overflow)
}

// endCaches is Reset's work before the flush.
func (o *AddEpisode) endCaches(write bool) {
	for i := range o.cached {
		if write && o.cached[i] > 0 && !o.overflow[i] {
			for _, tb := range o.tables {
				o.c.queue(tb, i, int(o.cached[i]), 0, o.priority)
			}
		}
		o.cached[i], o.overflow[i] = 0, false
	}
}

// record updates the episode caches after a step was written to the
// written rows (in a Shared group, every active row, also those of an
// overflowing episode, which are ignored here) and queues the episodes
// the step ends.
func (o *AddEpisode) record(t *driver.Trajectory, written []int) error {
	c := o.c
	var errs []error
	for _, i := range o.fresh {
		o.overflow[i] = true
		o.c.stats.SkippedEpisodes++
		if !o.bypass {
			errs = append(errs, &driver.RowError{Row: i, Err: fmt.Errorf("%w: %s: buffer row %d: more than %d steps; the episode is dropped",
				ErrEpisodeTooLong, c.kind, c.rows[i], o.max)})
		}
	}
	for _, i := range written {
		if o.overflow[i] {
			continue
		}
		o.cached[i]++
		if t.StepType[i] == tensorbuf.Last {
			for _, tb := range o.tables {
				c.queue(tb, i, int(o.cached[i]), 0, o.priority)
			}
			o.cached[i] = 0
		}
	}
	for i, ov := range o.overflow {
		if ov && t.IsActive(i) && t.StepType[i] == tensorbuf.Last {
			o.overflow[i], o.cached[i] = false, 0
		}
	}
	return errors.Join(errs...)
}

// Reset ends every row's episode cache. With writeCachedSteps the cached
// steps of each row's unfinished episode are inserted as one item (an
// episode without its end; nothing for a row whose episode overflowed);
// otherwise they are dropped (they stay in the buffer).
func (o *AddEpisode) Reset(writeCachedSteps bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c.closed() {
		return o.c.errClosed("Reset")
	}
	o.endCaches(writeCachedSteps)
	return o.c.flush()
}

// Flush is as TrajectorySequence.Flush.
func (o *AddEpisode) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c.closed() {
		return o.c.errClosed("Flush")
	}
	return o.c.flush()
}

// Close inserts pending items (those that still cannot be inserted are
// dropped and reported with ErrInsert), drops the episode caches and
// releases the observer's rows. Closing a closed observer does nothing; Observe, Flush
// and Reset fail with ErrClosed until Open.
func (o *AddEpisode) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.cached)
	clear(o.overflow)
	return o.c.close()
}

// Open takes the observer's rows again after Close, with empty caches. It
// fails with tensorbuf.ErrRowOwned if another writer has taken a row
// meanwhile; on an open observer it does nothing.
func (o *AddEpisode) Open() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.c.closed() {
		return nil
	}
	clear(o.cached)
	clear(o.overflow)
	return o.c.open()
}

// SetPriority sets the priority of the episodes inserted from now on
// (TF-Agents' update_priority); it must be finite and non-negative.
func (o *AddEpisode) SetPriority(p float64) error {
	if !validPriority(p) {
		return fmt.Errorf("%w: %s: priority %v must be finite and non-negative", ErrConfig, o.c.kind, p)
	}
	o.mu.Lock()
	o.priority = p
	o.mu.Unlock()
	return nil
}

// Stats returns the observer's counters.
func (o *AddEpisode) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.c.snapshot()
}

// Cached returns, per batch row, the number of steps of the row's current
// episode written so far.
func (o *AddEpisode) Cached() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int64(nil), o.cached...)
}
