package observer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// ErrShared reports a call that a member of a Shared group cannot make on
// its own: Observe (the group observes, and feeds its members).
var ErrShared = errors.New("observer: member of a Shared group")

// SharedConfig configures a Shared group. The constructor copies what it
// needs.
type SharedConfig struct {
	// Rows maps the trajectory's batch rows to buffer rows, as in
	// SequenceConfig; nil means every buffer row, in order.
	Rows []int
	// Context bounds the waits of insertions into rate-limited tables for
	// members that set none; nil means context.Background().
	Context context.Context
	// DataSpec is as in SequenceConfig.
	DataSpec []tensorbuf.Field
}

// Shared lets several item-writing observers create items over the same
// buffer rows, as TF-Agents users do when they pass several Reverb
// observers (an episode table, a sequence table, ...) to one driver. In
// TF-Agents each observer writes its own copy of the trajectory into its
// own Reverb table; here the steps are stored once: the group owns the
// rows through one tensorbuf.Writer, writes every observed step once, and
// hands it to each member, which keeps its own per-row state and creates
// exactly the items it would create alone on the same steps.
//
//	g, _ := observer.NewShared(buf, observer.SharedConfig{})
//	ep, _ := g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"episodes"}, MaxSequenceLength: 500})
//	seq, _ := g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 8})
//	d, _ := driver.NewStepDriver(env, policy, 1000, driver.WithObservers(g)) // not ep and seq
//
// Pass the group to the driver, not its members: a member's Observe fails
// with ErrShared. Members are created with the group's methods, use the
// group's rows (their Rows must be nil or the same) and may be added at
// any time; a new member starts with empty caches, as after Open. A
// member's Reset, Flush, SetPriority, Stats and Cached work as for a lone
// observer; its Close stops it (it receives no further step) and its Open
// resumes it with empty caches. The group's Reset, Flush, Close and Open
// do the same for every member; Close also releases the rows.
//
// One difference from lone observers: an AddEpisode member does not stop
// the steps of an episode longer than its maximum from being stored (the
// other members need them); it creates no item for that episode, exactly
// as alone.
//
// A Shared group and its members are safe for concurrent use; all their
// calls are serialised by one lock.
type Shared struct {
	mu      sync.Mutex
	c       *core // the writer, rows and cursors; never queues items
	ctx     context.Context
	members []member
}

// member is an item-creating observer: a TrajectorySequence or
// AddTrajectory (sequencer) or an AddEpisode. The methods are called with
// its lock held.
type member interface {
	base() *core
	// prepare notes the state before a step is written.
	prepare(t *driver.Trajectory)
	// keep selects the rows a lone observer writes (nil: every active row).
	keep() func(i int) bool
	// record queues the items a step written to the batch rows written
	// creates; errors concern the step (an AddEpisode overflow).
	record(t *driver.Trajectory, written []int) error
	// endCaches ends every row's cache as Reset does, before the flush.
	endCaches(write bool)
	// clearCaches drops every cache (Close, Open).
	clearCaches()
}

// observeAlone is Observe of a lone observer: check, write, create items,
// insert them. The caller holds the observer's lock.
func observeAlone(m member, t *driver.Trajectory) error {
	c := m.base()
	if c.grp != nil {
		return fmt.Errorf("%w: %s.Observe: pass the Shared group to the driver, not its members", ErrShared, c.kind)
	}
	if c.closed() {
		return c.errClosed("Observe")
	}
	if err := c.check(t); err != nil {
		return err
	}
	m.prepare(t)
	written, err := c.add(t, m.keep())
	if err != nil {
		return err
	}
	err = m.record(t, written)
	if ferr := c.flush(); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return err
}

// NewShared returns an open group that owns the given rows of buf. It
// fails with ErrConfig for bad rows or a data spec the buffer does not
// store, or with tensorbuf.ErrRowOwned when another writer owns a row.
func NewShared(buf *tensorbuf.Buffer, cfg SharedConfig) (*Shared, error) {
	c, err := newCore("Shared", buf, cfg.Rows, cfg.Context, cfg.DataSpec, nil)
	if err != nil {
		return nil, err
	}
	return &Shared{c: c, ctx: c.ctx}, nil
}

// join makes the core of a new member of g. The caller (a constructor)
// does not hold g's lock.
func (g *Shared) join(kind string, buf *tensorbuf.Buffer, rows []int, ctx context.Context) (*core, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if buf != g.c.buf {
		return nil, fmt.Errorf("%w: %s: a member must write into its Shared group's buffer", ErrConfig, kind)
	}
	if rows != nil && !slices.Equal(rows, g.c.rows) {
		return nil, fmt.Errorf("%w: %s: rows %v differ from its Shared group's %v (leave Rows nil)", ErrConfig, kind, rows, g.c.rows)
	}
	if g.c.closed() {
		return nil, fmt.Errorf("%w: %s: its Shared group is closed", ErrClosed, kind)
	}
	if ctx == nil {
		ctx = g.ctx
	}
	return &core{
		kind:   kind,
		buf:    buf,
		rows:   g.c.rows,
		ctx:    ctx,
		fields: g.c.fields,
		roles:  g.c.roles,
		w:      g.c.w,
		cursor: g.c.cursor, // shared: the group advances it
		grp:    g,
	}, nil
}

// add registers a new member. The caller does not hold g's lock.
func (g *Shared) add(m member) {
	g.mu.Lock()
	g.members = append(g.members, m)
	g.mu.Unlock()
}

// NewTrajectorySequence adds a TrajectorySequence member (see
// NewTrajectorySequence; cfg.Rows must be nil or the group's rows).
func (g *Shared) NewTrajectorySequence(cfg SequenceConfig) (*TrajectorySequence, error) {
	return newTrajectorySequence(g.c.buf, cfg, g)
}

// NewAddTrajectory adds an AddTrajectory member (see NewAddTrajectory).
func (g *Shared) NewAddTrajectory(cfg AddTrajectoryConfig) (*AddTrajectory, error) {
	return newAddTrajectory(g.c.buf, cfg, g)
}

// NewAddEpisode adds an AddEpisode member (see NewAddEpisode).
func (g *Shared) NewAddEpisode(cfg AddEpisodeConfig) (*AddEpisode, error) {
	return newAddEpisode(g.c.buf, cfg, g)
}

// Observe writes one batched trajectory step once (rows marked inactive
// are skipped) and lets every open member create and insert its items. A
// malformed trajectory changes nothing. Errors of members (ErrInsert,
// ErrEpisodeTooLong) are joined; each member has processed the step.
func (g *Shared) Observe(t *driver.Trajectory) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.c
	if c.closed() {
		return c.errClosed("Observe")
	}
	if err := c.check(t); err != nil {
		return err
	}
	for _, m := range g.members {
		if !m.base().closed() {
			m.prepare(t)
		}
	}
	written, err := c.add(t, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range g.members {
		if mc := m.base(); !mc.closed() {
			if err := m.record(t, written); err != nil {
				errs = append(errs, err)
			}
			if err := mc.flush(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Flush retries the pending insertions of every open member.
func (g *Shared) Flush() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c.closed() {
		return g.c.errClosed("Flush")
	}
	var errs []error
	for _, m := range g.members {
		if mc := m.base(); !mc.closed() {
			errs = append(errs, mc.flush())
		}
	}
	return errors.Join(errs...)
}

// Reset resets every open member, as each one's Reset(writeCachedSteps).
func (g *Shared) Reset(writeCachedSteps bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c.closed() {
		return g.c.errClosed("Reset")
	}
	var errs []error
	for _, m := range g.members {
		if mc := m.base(); !mc.closed() {
			m.endCaches(writeCachedSteps)
			errs = append(errs, mc.flush())
		}
	}
	return errors.Join(errs...)
}

// Close closes every member (inserting what is pending, dropping the
// caches), then releases the rows. Closing a closed group does nothing.
func (g *Shared) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, m := range g.members {
		m.clearCaches()
		errs = append(errs, m.base().close())
	}
	errs = append(errs, g.c.close())
	return errors.Join(errs...)
}

// Open takes the rows again after Close and reopens every member with
// empty caches. It fails with tensorbuf.ErrRowOwned if another writer has
// taken a row meanwhile; on an open group it does nothing.
func (g *Shared) Open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.c.closed() {
		return nil
	}
	if err := g.c.open(); err != nil {
		return err
	}
	for _, m := range g.members {
		m.clearCaches()
		if err := m.base().open(); err != nil {
			return err
		}
	}
	return nil
}

// Stats returns the group's counters: the steps written, and the items,
// pending items, dropped items and skipped episodes summed over members.
func (g *Shared) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Steps: g.c.stats.Steps}
	for _, m := range g.members {
		ms := m.base().snapshot()
		s.Items += ms.Items
		s.Pending += ms.Pending
		s.Dropped += ms.Dropped
		s.SkippedEpisodes += ms.SkippedEpisodes
	}
	return s
}

// DataSpec returns the fields of the trajectories a driver of env and
// policy produces: the environment's observations, its actions and the
// policy's info, with their roles set. Pass it as an observer's DataSpec
// so that a buffer lacking one of them is refused at construction. A nil
// policy contributes no policy info. Safe for concurrent use if env and
// policy's spec methods are.
func DataSpec(env driver.Environment, policy driver.Policy) []tensorbuf.Field {
	var out []tensorbuf.Field
	add := func(fs []tensorbuf.Field, r tensorbuf.Role) {
		for _, f := range fs {
			f.Role = r
			f.Shape = slices.Clone(f.Shape)
			out = append(out, f)
		}
	}
	if env != nil {
		add(env.ObservationSpec(), tensorbuf.Observation)
		add(env.ActionSpec(), tensorbuf.Action)
	}
	if policy != nil {
		add(policy.InfoSpec(), tensorbuf.PolicyInfo)
	}
	return out
}

// checkDataSpec refuses a buffer that does not store every field of spec
// with the same role, dtype and shape.
func checkDataSpec(kind string, buf *tensorbuf.Buffer, spec []tensorbuf.Field) error {
	if len(spec) == 0 {
		return nil
	}
	stored := buf.Fields()
	for _, f := range spec {
		i := slices.IndexFunc(stored, func(s tensorbuf.Field) bool { return s.Name == f.Name })
		if i < 0 {
			return fmt.Errorf("%w: %s: the buffer has no field %q (%v %v %v) of the data spec: its values would be dropped",
				ErrConfig, kind, f.Name, f.Role, f.DType, f.Shape)
		}
		s := stored[i]
		if s.Role != f.Role || s.DType != f.DType || !slices.Equal(s.Shape, f.Shape) {
			return fmt.Errorf("%w: %s: field %q is stored as %v %v %v, the data spec has %v %v %v",
				ErrConfig, kind, f.Name, s.Role, s.DType, s.Shape, f.Role, f.DType, f.Shape)
		}
	}
	return nil
}
