package observer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Stats counts what an item-writing observer has done since it was
// created. It is a snapshot returned by value, safe to share.
type Stats struct {
	// Steps is the number of trajectory steps written to the buffer,
	// summed over rows.
	Steps int64
	// Items is the number of items inserted, summed over tables.
	Items int64
	// Pending is the number of items created but not yet inserted (their
	// insertion timed out or its context was canceled); Flush retries.
	Pending int
	// Dropped is the number of items that could not be inserted and were
	// given up (their steps were overwritten, or the buffer closed).
	Dropped int64
	// SkippedEpisodes is the number of episodes an AddEpisode observer
	// did not write because they were longer than its maximum.
	SkippedEpisodes int64
}

// pendingItem is an item waiting to be inserted into its table.
type pendingItem struct {
	t  *tensorbuf.Table
	it tensorbuf.Item
}

// core is the buffer side shared by the item-writing observers: the
// writer that owns the observer's rows, the conversion of a batched
// trajectory into a tensorbuf.Step, and the queue of items to insert.
// It is not safe for concurrent use; observers guard it with a mutex.
type core struct {
	kind   string // observer type, for error messages
	buf    *tensorbuf.Buffer
	rows   []int // buffer row of each batch row
	ctx    context.Context
	fields []tensorbuf.Field    // the buffer's user fields
	roles  [3][]tensorbuf.Field // the same, by role

	w      *tensorbuf.Writer // nil while closed
	cursor []int64           // per batch row: position of its next step

	// scratch for one add
	step     tensorbuf.Step
	sel      []int
	compact  map[string]*tensor.Dense
	compactN int

	pending []pendingItem
	stats   Stats

	// grp is the Shared group whose writer this core uses, nil for a lone
	// observer. A member's core shares the group's rows and cursors, never
	// writes steps itself, and keeps its own items, queue and counters.
	grp *Shared
}

// newCore validates what all item-writing observers share and opens the
// writer, or joins the group's when grp is not nil. rows nil means every
// row of the buffer (or of the group), in order. spec, when not nil, lists
// the fields the trajectories will carry: the buffer must store each.
func newCore(kind string, buf *tensorbuf.Buffer, rows []int, ctx context.Context, spec []tensorbuf.Field, grp *Shared) (*core, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: %s: nil buffer", ErrConfig, kind)
	}
	if err := checkDataSpec(kind, buf, spec); err != nil {
		return nil, err
	}
	if grp != nil {
		return grp.join(kind, buf, rows, ctx)
	}
	if rows == nil {
		rows = make([]int, buf.NumEnvs())
		for i := range rows {
			rows[i] = i
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s: empty row list", ErrConfig, kind)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := &core{
		kind:    kind,
		buf:     buf,
		rows:    slices.Clone(rows),
		ctx:     ctx,
		fields:  buf.Fields(),
		cursor:  make([]int64, len(rows)),
		compact: make(map[string]*tensor.Dense),
	}
	for _, f := range c.fields {
		c.roles[f.Role] = append(c.roles[f.Role], f)
	}
	if err := c.open(); err != nil {
		if errors.Is(err, tensorbuf.ErrRows) {
			err = fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return nil, err
	}
	return c, nil
}

// checkTables resolves table names, refusing unknown and repeated ones.
func checkTables(kind string, buf *tensorbuf.Buffer, names []string) ([]*tensorbuf.Table, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: %s: nil buffer", ErrConfig, kind)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %s: no table", ErrConfig, kind)
	}
	ts := make([]*tensorbuf.Table, len(names))
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("%w: %s: table %q given twice", ErrConfig, kind, n)
		}
		t, err := buf.Table(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, kind, err)
		}
		ts[i] = t
	}
	return ts, nil
}

// checkLength refuses a sequence length that is not positive or that the
// buffer's rows cannot hold: an item's first step would be overwritten
// before the item is complete.
func checkLength(kind, what string, buf *tensorbuf.Buffer, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: %s: %s %d must be positive", ErrConfig, kind, what, n)
	}
	if n > buf.Capacity() {
		return fmt.Errorf("%w: %s: %s %d exceeds the buffer's capacity of %d steps per row: %w",
			ErrConfig, kind, what, n, buf.Capacity(), tensorbuf.ErrSequenceLen)
	}
	return nil
}

// checkPriority returns the priority of new items: p, or
// tensorbuf.DefaultPriority for 0 (the table's running maximum priority,
// 1 until it has been given one: TF-Agents' default of 1 on a fresh
// table, and the prioritized replay paper's rule after).
func checkPriority(kind string, p float64) (float64, error) {
	if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		return 0, fmt.Errorf("%w: %s: priority %v must be finite and non-negative", ErrConfig, kind, p)
	}
	if p == 0 {
		return tensorbuf.DefaultPriority, nil
	}
	return p, nil
}

func validPriority(p float64) bool { return p >= 0 && !math.IsInf(p, 0) && !math.IsNaN(p) }

func (c *core) closed() bool { return c.w == nil }

func (c *core) errClosed(op string) error {
	return fmt.Errorf("%w: %s.%s", ErrClosed, c.kind, op)
}

// open takes ownership of the rows (a group member: takes the group's
// writer). It is a no-op when already open.
func (c *core) open() error {
	if c.w != nil {
		return nil
	}
	if c.grp != nil {
		if c.grp.c.w == nil {
			return fmt.Errorf("%w: %s: its Shared group is closed", ErrClosed, c.kind)
		}
		c.w = c.grp.c.w
		return nil
	}
	w, err := c.buf.NewWriter(c.rows...)
	if err != nil {
		return fmt.Errorf("observer: %s: taking rows %v of the buffer: %w", c.kind, c.rows, err)
	}
	c.w = w
	for i, r := range c.rows {
		c.cursor[i] = c.buf.Cursor(r)
	}
	return nil
}

// close inserts what is pending, then releases the rows. Items that still
// cannot be inserted are dropped.
func (c *core) close() error {
	if c.w == nil {
		return nil
	}
	err := c.flush()
	c.stats.Dropped += int64(len(c.pending))
	c.pending = c.pending[:0]
	if c.grp != nil {
		c.w = nil // the group owns the writer
		return err
	}
	if cerr := c.w.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("observer: %s: releasing rows: %w", c.kind, cerr))
	}
	c.w = nil
	return err
}

// check validates a batched trajectory against the observer's rows and
// the buffer's fields before anything is written.
func (c *core) check(t *driver.Trajectory) error {
	if t == nil {
		return fmt.Errorf("%w: %s: nil trajectory", ErrTrajectory, c.kind)
	}
	b := len(c.rows)
	if len(t.StepType) != b || len(t.NextStepType) != b || len(t.Reward) != b || len(t.Discount) != b {
		return fmt.Errorf("%w: %s writes %d rows, trajectory has %d step types, %d next step types, %d rewards, %d discounts",
			ErrTrajectory, c.kind, b, len(t.StepType), len(t.NextStepType), len(t.Reward), len(t.Discount))
	}
	if t.Active != nil && len(t.Active) != b {
		return fmt.Errorf("%w: %s: %d active flags for %d rows", ErrTrajectory, c.kind, len(t.Active), b)
	}
	for i := range b {
		if !validStepType(t.StepType[i]) || !validStepType(t.NextStepType[i]) {
			return fmt.Errorf("%w: %s: batch row %d: step types %d, %d", ErrTrajectory, c.kind, i, t.StepType[i], t.NextStepType[i])
		}
	}
	for role, m := range [3]map[string]*tensor.Dense{t.Observation, t.Action, t.PolicyInfo} {
		if err := driver.CheckTensors(c.roles[role], b, m); err != nil {
			return fmt.Errorf("%w: %s: %v: %w", ErrTrajectory, c.kind, tensorbuf.Role(role), err)
		}
	}
	return nil
}

func validStepType(s tensorbuf.StepType) bool {
	return s == tensorbuf.First || s == tensorbuf.Mid || s == tensorbuf.Last
}

func (c *core) source(t *driver.Trajectory, f tensorbuf.Field) *tensor.Dense {
	switch f.Role {
	case tensorbuf.Action:
		return t.Action[f.Name]
	case tensorbuf.PolicyInfo:
		return t.PolicyInfo[f.Name]
	}
	return t.Observation[f.Name]
}

// add writes the batch rows of a checked trajectory that are active and
// for which keep (nil: all) is true, as one step, and returns them in
// batch order (in scratch memory valid until the next add). Each written
// row's cursor advances. On error nothing is written.
func (c *core) add(t *driver.Trajectory, keep func(i int) bool) ([]int, error) {
	c.sel = c.sel[:0]
	for i := range c.rows {
		if t.IsActive(i) && (keep == nil || keep(i)) {
			c.sel = append(c.sel, i)
		}
	}
	n := len(c.sel)
	if n == 0 {
		return c.sel, nil
	}
	s := &c.step
	if s.Values == nil {
		s.Values = make(map[string]*tensor.Dense, len(c.fields))
	}
	if n == len(c.rows) {
		s.Rows = nil
		s.StepType, s.NextStepType, s.Reward, s.Discount = t.StepType, t.NextStepType, t.Reward, t.Discount
		for _, f := range c.fields {
			s.Values[f.Name] = c.source(t, f)
		}
	} else {
		s.Rows = s.Rows[:0]
		s.StepType, s.NextStepType = s.StepType[:0], s.NextStepType[:0]
		s.Reward, s.Discount = s.Reward[:0], s.Discount[:0]
		for _, i := range c.sel {
			s.Rows = append(s.Rows, c.rows[i])
			s.StepType = append(s.StepType, t.StepType[i])
			s.NextStepType = append(s.NextStepType, t.NextStepType[i])
			s.Reward = append(s.Reward, t.Reward[i])
			s.Discount = append(s.Discount, t.Discount[i])
		}
		if c.compactN != n {
			clear(c.compact)
			c.compactN = n
		}
		for _, f := range c.fields {
			d, ok := c.compact[f.Name]
			if !ok {
				d = tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(append([]int{n}, f.Shape...)...))
				c.compact[f.Name] = d
			}
			src, sb := c.source(t, f).Raw, f.StepBytes()
			for k, i := range c.sel {
				copy(d.Raw[k*sb:(k+1)*sb], src[i*sb:(i+1)*sb])
			}
			s.Values[f.Name] = d
		}
	}
	err := c.w.Add(s)
	clear(s.Values)
	if n == len(c.rows) {
		s.StepType, s.NextStepType, s.Reward, s.Discount = nil, nil, nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("observer: %s: writing a step: %w", c.kind, err)
	}
	for _, i := range c.sel {
		c.cursor[i]++
	}
	c.stats.Steps += int64(n)
	return c.sel, nil
}

// queue adds an item over batch row i's last len steps followed by pad
// pad steps to the insertion queue.
func (c *core) queue(t *tensorbuf.Table, i, length, pad int, priority float64) {
	c.pending = append(c.pending, pendingItem{t: t, it: tensorbuf.Item{
		Row:      c.rows[i],
		Start:    c.cursor[i] - int64(length),
		Len:      length,
		Pad:      pad,
		Priority: priority,
	}})
}

// flush inserts the queued items in order. An insertion that runs out of
// time (rate limiter timeout, context done) stops the flush and keeps it
// and the rest queued; any other failure drops that item and goes on.
func (c *core) flush() error {
	var errs []error
	done := 0
	for _, p := range c.pending {
		_, err := p.t.InsertContext(c.ctx, p.it)
		if err == nil {
			c.stats.Items++
			done++
			continue
		}
		if retryable(err) {
			errs = append(errs, fmt.Errorf("%w: %s: table %q, item %+v (%d items pending): %w",
				ErrInsert, c.kind, p.t.Name(), p.it, len(c.pending)-done, err))
			break
		}
		c.stats.Dropped++
		done++
		errs = append(errs, fmt.Errorf("%w: %s: table %q, item %+v dropped: %w", ErrInsert, c.kind, p.t.Name(), p.it, err))
	}
	n := copy(c.pending, c.pending[done:])
	clear(c.pending[n:])
	c.pending = c.pending[:n]
	return errors.Join(errs...)
}

func retryable(err error) bool {
	return errors.Is(err, tensorbuf.ErrRateLimited) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (c *core) snapshot() Stats {
	s := c.stats
	if c.grp != nil {
		s.Steps = c.grp.c.stats.Steps
	}
	s.Pending = len(c.pending)
	return s
}
