package observer

import (
	"context"
	"fmt"
	"sync"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// seqTable is one table of a sequence observer with its window rule.
type seqTable struct {
	t      *tensorbuf.Table
	length int
	stride int
}

// due reports whether an item of the last length steps is created when
// the cache holds cached steps (TF-Agents' rule).
func (s seqTable) due(cached int64) bool {
	l := int64(s.length)
	return cached >= l && (cached-l)%int64(s.stride) == 0
}

// sequencer is the engine of TrajectorySequence and AddTrajectory: per
// batch row, the number of steps cached since the last reset, and the
// window rule of each table.
type sequencer struct {
	mu       *sync.Mutex // the group's for a member of a Shared group
	c        *core
	tables   []seqTable
	pad      bool
	tile     bool
	priority float64
	// cut makes every boundary step end the cache (AddTrajectory).
	cut    bool
	cached []int64
}

func newSequencer(kind string, buf *tensorbuf.Buffer, tables []seqTable, priority float64, pad, tile bool, rows []int, ctx context.Context, spec []tensorbuf.Field, grp *Shared) (*sequencer, error) {
	if tile && !pad {
		return nil, fmt.Errorf("%w: %s: TileEndOfEpisodes requires PadEndOfEpisodes", ErrConfig, kind)
	}
	p, err := checkPriority(kind, priority)
	if err != nil {
		return nil, err
	}
	c, err := newCore(kind, buf, rows, ctx, spec, grp)
	if err != nil {
		return nil, err
	}
	s := &sequencer{mu: new(sync.Mutex), c: c, tables: tables, pad: pad, tile: tile, priority: p, cached: make([]int64, len(c.rows))}
	if grp != nil {
		s.mu = &grp.mu
		grp.add(s)
	}
	return s, nil
}

func (s *sequencer) observe(t *driver.Trajectory) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return observeAlone(s, t)
}

// The member methods (see member).
func (s *sequencer) base() *core                { return s.c }
func (s *sequencer) prepare(*driver.Trajectory) {}
func (s *sequencer) keep() func(int) bool       { return nil }
func (s *sequencer) clearCaches()               { clear(s.cached) }
func (s *sequencer) endCaches(write bool) {
	for i := range s.cached {
		s.endRow(i, write && s.pad)
	}
}

// record creates the items completed by a written step.
func (s *sequencer) record(t *driver.Trajectory, written []int) error {
	c := s.c
	for _, i := range written {
		s.cached[i]++
		for _, st := range s.tables {
			if st.due(s.cached[i]) {
				c.queue(st.t, i, st.length, 0, s.priority)
			}
		}
		if s.cut && t.StepType[i] == tensorbuf.Last {
			s.endRow(i, s.pad)
		}
	}
	return nil
}

// endRow empties batch row i's cache, first padding it and creating the
// padded items when pad is set. Pad steps are appended one at a time and
// the item rule applied after each: length-cached pads (none when the
// cache holds a full window), or length-1 with tiling.
func (s *sequencer) endRow(i int, pad bool) {
	cached := s.cached[i]
	s.cached[i] = 0
	if !pad || cached == 0 {
		return
	}
	for _, st := range s.tables {
		n := int64(st.length) - cached
		if s.tile {
			n = int64(st.length) - 1
		}
		for p := int64(1); p <= n; p++ {
			if st.due(cached + p) {
				s.c.queue(st.t, i, st.length-int(p), int(p), s.priority)
			}
		}
	}
}

func (s *sequencer) reset(write bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.closed() {
		return s.c.errClosed("Reset")
	}
	s.endCaches(write)
	return s.c.flush()
}

func (s *sequencer) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.closed() {
		return s.c.errClosed("Flush")
	}
	return s.c.flush()
}

func (s *sequencer) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cached)
	return s.c.close()
}

func (s *sequencer) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.c.closed() {
		return nil
	}
	clear(s.cached)
	return s.c.open()
}

func (s *sequencer) setPriority(p float64) error {
	if !validPriority(p) {
		return fmt.Errorf("%w: %s: priority %v must be finite and non-negative", ErrConfig, s.c.kind, p)
	}
	s.mu.Lock()
	s.priority = p
	s.mu.Unlock()
	return nil
}

func (s *sequencer) stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.snapshot()
}

func (s *sequencer) cachedSteps() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.cached...)
}

// SequenceConfig configures a TrajectorySequence observer (the arguments
// of TF-Agents' ReverbTrajectorySequenceObserver). The constructor copies
// what it needs; the config is not retained.
type SequenceConfig struct {
	// Tables names the tables that receive every item (at least one).
	Tables []string
	// SequenceLength is the number of steps of an item, 1 to the buffer's
	// capacity.
	SequenceLength int
	// Stride is the number of steps between the starts of two items of a
	// row; 0 means 1 (every window).
	Stride int
	// Priority is the priority of new items; 0 means the table's default
	// (tensorbuf.DefaultPriority: its running maximum priority, 1 on a
	// fresh table, as TF-Agents' default of 1). Use SetPriority for a
	// priority of 0.
	Priority float64
	// PadEndOfEpisodes makes Reset(true) pad the cache with pad steps and
	// write the padded items.
	PadEndOfEpisodes bool
	// TileEndOfEpisodes makes that padding produce every window that
	// holds at least one real step; it requires PadEndOfEpisodes.
	TileEndOfEpisodes bool
	// Rows maps the trajectory's batch rows to buffer rows: batch row i is
	// written to buffer row Rows[i]. nil means every buffer row, in order
	// (the environment's batch size must then equal the buffer's NumEnvs).
	Rows []int
	// Context bounds the waits of insertions into rate-limited tables;
	// nil means context.Background() (a member of a Shared group: the
	// group's context).
	Context context.Context
	// DataSpec, when set, lists the fields the trajectories will carry
	// (see DataSpec): the constructor refuses, with ErrConfig, a buffer
	// that does not store one of them with the same role, dtype and
	// shape, instead of Observe dropping it silently.
	DataSpec []tensorbuf.Field
}

func seqTables(kind string, buf *tensorbuf.Buffer, names []string, lengths, strides []int) ([]seqTable, error) {
	ts, err := checkTables(kind, buf, names)
	if err != nil {
		return nil, err
	}
	out := make([]seqTable, len(ts))
	for k, t := range ts {
		if err := checkLength(kind, fmt.Sprintf("table %q: sequence length", names[k]), buf, lengths[k]); err != nil {
			return nil, err
		}
		stride := strides[k]
		if stride < 0 {
			return nil, fmt.Errorf("%w: %s: table %q: stride %d must not be negative", ErrConfig, kind, names[k], stride)
		}
		if stride == 0 {
			stride = 1
		}
		out[k] = seqTable{t: t, length: lengths[k], stride: stride}
	}
	return out, nil
}

// TrajectorySequence writes every observed step into a buffer and creates
// items of SequenceLength consecutive steps of one env row in its tables,
// as TF-Agents' ReverbTrajectorySequenceObserver does: windows are not cut
// at episode boundaries, so an item may hold the end of one episode, its
// boundary step and the start of the next.
//
// Per batch row it counts the steps cached since the last Reset; after
// each step it creates an item of the row's last L = SequenceLength steps
// when cached >= L and (cached-L) % Stride == 0. Reset(true) with
// PadEndOfEpisodes appends pad steps one at a time, applying the same rule
// after each: L-cached pads (none when cached >= L), or L-1 with
// TileEndOfEpisodes. Pad steps are not stored: an item holds its real
// steps (Len) and its number of pad steps (Pad), and a sample writes the
// pad steps (zeros, step type Last, next step type First, mask false).
//
// Drivers count steps without boundary steps: a step driver of n steps
// may feed more than n trajectories per row, so to get exactly one item
// per run of SequenceLength n set Stride to n as well (the note in
// TF-Agents' ReverbTrajectorySequenceObserver documentation).
//
// The observer owns its buffer rows through one tensorbuf.Writer while it
// is open: a second observer on any of the same rows is refused with an
// error wrapping tensorbuf.ErrRowOwned.
//
// A TrajectorySequence is safe for concurrent use; its calls are
// serialised.
type TrajectorySequence struct{ s *sequencer }

// NewTrajectorySequence returns an open TrajectorySequence observer
// writing into buf. It fails with ErrConfig for an invalid configuration
// (unknown or repeated table, non-positive or too long sequence length,
// negative stride or priority, tile without pad, bad rows), or with
// tensorbuf.ErrRowOwned when another writer owns one of its rows.
func NewTrajectorySequence(buf *tensorbuf.Buffer, cfg SequenceConfig) (*TrajectorySequence, error) {
	return newTrajectorySequence(buf, cfg, nil)
}

func newTrajectorySequence(buf *tensorbuf.Buffer, cfg SequenceConfig, grp *Shared) (*TrajectorySequence, error) {
	const kind = "TrajectorySequence"
	lengths := make([]int, len(cfg.Tables))
	strides := make([]int, len(cfg.Tables))
	for k := range lengths {
		lengths[k], strides[k] = cfg.SequenceLength, cfg.Stride
	}
	tables, err := seqTables(kind, buf, cfg.Tables, lengths, strides)
	if err != nil {
		return nil, err
	}
	s, err := newSequencer(kind, buf, tables, cfg.Priority, cfg.PadEndOfEpisodes, cfg.TileEndOfEpisodes, cfg.Rows, cfg.Context, cfg.DataSpec, grp)
	if err != nil {
		return nil, err
	}
	return &TrajectorySequence{s: s}, nil
}

// Observe writes one batched trajectory step (rows marked inactive are
// skipped and keep their state; trajectory fields the buffer does not
// store are ignored) and inserts the items it completes. A malformed
// trajectory changes nothing. If an insertion fails after the
// step was written, the step stays written and the error wraps
// ErrInsert (see Flush).
func (o *TrajectorySequence) Observe(t *driver.Trajectory) error { return o.s.observe(t) }

// Flush inserts the items still pending after an insertion ran out of
// time (rate limiter or context). Items are otherwise inserted as soon as
// they are created, so Flush has nothing to do then.
func (o *TrajectorySequence) Flush() error { return o.s.flush() }

// Reset ends every row's cache. With writeCachedSteps and
// PadEndOfEpisodes it first pads each non-empty cache and inserts the
// padded items (see TrajectorySequence); otherwise the cached steps that
// complete no window are dropped (they stay in the buffer). Reset is
// meant for the end of collection: windows run across episodes.
func (o *TrajectorySequence) Reset(writeCachedSteps bool) error { return o.s.reset(writeCachedSteps) }

// Close inserts pending items (those that still cannot be inserted are
// dropped and reported with ErrInsert), drops the caches without padding
// and releases the observer's rows to other writers. Closing a closed
// observer does nothing. Observe, Flush and Reset fail with ErrClosed
// until Open.
func (o *TrajectorySequence) Close() error { return o.s.close() }

// Open takes the observer's rows again after Close, with empty caches:
// the first window starts at the next observed step. It fails with
// tensorbuf.ErrRowOwned if another writer has taken a row meanwhile. Open
// on an open observer does nothing.
func (o *TrajectorySequence) Open() error { return o.s.open() }

// SetPriority sets the priority of the items created from now on; it
// must be finite and non-negative.
func (o *TrajectorySequence) SetPriority(p float64) error { return o.s.setPriority(p) }

// Stats returns the observer's counters.
func (o *TrajectorySequence) Stats() Stats { return o.s.stats() }

// Cached returns, per batch row, the number of steps observed since the
// row's cache was last emptied.
func (o *TrajectorySequence) Cached() []int64 { return o.s.cachedSteps() }

// TableSequence is one table of an AddTrajectory observer with its own
// window (a plain value).
type TableSequence struct {
	// Table names the table.
	Table string
	// SequenceLength is the number of steps of the table's items, 1 to
	// the buffer's capacity.
	SequenceLength int
	// Stride is the number of steps between the starts of two items of a
	// row within an episode; 0 means 1.
	Stride int
}

// AddTrajectoryConfig configures an AddTrajectory observer (the arguments
// of TF-Agents' ReverbAddTrajectoryObserver, with a sequence length and
// stride per table). The constructor copies what it needs.
type AddTrajectoryConfig struct {
	// Tables lists the tables and their windows (at least one).
	Tables []TableSequence
	// Priority is the priority of new items; 0 means the table's default
	// (tensorbuf.DefaultPriority: its running maximum priority, 1 on a
	// fresh table, as TF-Agents' default of 1). Use SetPriority for a
	// priority of 0.
	Priority float64
	// PadEndOfEpisodes pads a row's cache at every boundary step (and on
	// Reset(true)) and writes the padded items; without it the cache is
	// dropped.
	PadEndOfEpisodes bool
	// TileEndOfEpisodes makes the padding produce every window that holds
	// at least one real step; it requires PadEndOfEpisodes.
	TileEndOfEpisodes bool
	// Rows, Context and DataSpec are as in SequenceConfig.
	Rows     []int
	Context  context.Context
	DataSpec []tensorbuf.Field
}

// AddTrajectory writes every observed step into a buffer and creates items
// of consecutive steps within one episode of one env row, as TF-Agents'
// ReverbAddTrajectoryObserver does, in several tables at once, each with
// its own sequence length and stride (the steps are stored once).
//
// Per batch row it counts the steps cached since the row's last reset;
// after each step, for each table, it creates an item of the row's last
// L steps when cached >= L and (cached-L) % stride == 0. A boundary step
// (StepType Last) is cached like any other and then resets the row: with
// PadEndOfEpisodes the cache is first padded as TrajectorySequence.Reset
// does (L-cached pad steps, or L-1 with TileEndOfEpisodes, the rule
// applied after each), otherwise it is dropped. A 3-step episode F, M, L
// (its L being the boundary step) with a sequence length of 4 gives
// [F M L P] untiled and [F M L P] [M L P P] [L P P P] tiled.
//
// Rows are owned as for TrajectorySequence. An AddTrajectory is safe for
// concurrent use; its calls are serialised.
type AddTrajectory struct{ s *sequencer }

// NewAddTrajectory returns an open AddTrajectory observer writing into
// buf. Errors are as for NewTrajectorySequence.
func NewAddTrajectory(buf *tensorbuf.Buffer, cfg AddTrajectoryConfig) (*AddTrajectory, error) {
	return newAddTrajectory(buf, cfg, nil)
}

func newAddTrajectory(buf *tensorbuf.Buffer, cfg AddTrajectoryConfig, grp *Shared) (*AddTrajectory, error) {
	const kind = "AddTrajectory"
	names := make([]string, len(cfg.Tables))
	lengths := make([]int, len(cfg.Tables))
	strides := make([]int, len(cfg.Tables))
	for k, ts := range cfg.Tables {
		names[k], lengths[k], strides[k] = ts.Table, ts.SequenceLength, ts.Stride
	}
	tables, err := seqTables(kind, buf, names, lengths, strides)
	if err != nil {
		return nil, err
	}
	s, err := newSequencer(kind, buf, tables, cfg.Priority, cfg.PadEndOfEpisodes, cfg.TileEndOfEpisodes, cfg.Rows, cfg.Context, cfg.DataSpec, grp)
	if err != nil {
		return nil, err
	}
	s.cut = true
	return &AddTrajectory{s: s}, nil
}

// Observe writes one batched trajectory step and inserts the items it
// completes, as TrajectorySequence.Observe, then resets the rows whose
// step is a boundary.
func (o *AddTrajectory) Observe(t *driver.Trajectory) error { return o.s.observe(t) }

// Flush is as TrajectorySequence.Flush.
func (o *AddTrajectory) Flush() error { return o.s.flush() }

// Reset ends every row's cache, padding it first when writeCachedSteps
// and PadEndOfEpisodes are set (as at a boundary step); otherwise the
// cached steps that complete no window are dropped. Between episodes no
// Reset is needed: boundary steps reset their rows.
func (o *AddTrajectory) Reset(writeCachedSteps bool) error { return o.s.reset(writeCachedSteps) }

// Close is as TrajectorySequence.Close.
func (o *AddTrajectory) Close() error { return o.s.close() }

// Open is as TrajectorySequence.Open.
func (o *AddTrajectory) Open() error { return o.s.open() }

// SetPriority sets the priority of the items created from now on; it
// must be finite and non-negative.
func (o *AddTrajectory) SetPriority(p float64) error { return o.s.setPriority(p) }

// Stats returns the observer's counters.
func (o *AddTrajectory) Stats() Stats { return o.s.stats() }

// Cached returns, per batch row, the number of steps cached since the
// row's last reset.
func (o *AddTrajectory) Cached() []int64 { return o.s.cachedSteps() }
