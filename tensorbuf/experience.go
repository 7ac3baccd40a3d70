package tensorbuf

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// ErrContinuity reports an experience whose observation contradicts the
// next observation of the previous experience of its row in the same
// episode (see ExperienceWriter.Append).
var ErrContinuity = errors.New("tensorbuf: observation contradicts the previous experience's next observation")

// Experience is a batch of experiences as MATLAB's replay memories take
// them (append(buffer, experience)): one per row, each the observation,
// action and policy info at t, the reward, the observation at t+1 and
// IsDone. Tensors are host tensors shaped [len(rows), ...field shape];
// the writer only reads them, during Append.
type Experience struct {
	// Rows are the env rows, in the order of the data; nil means all of
	// the writer's rows in the writer's order.
	Rows []int
	// Observation, Action and PolicyInfo hold every user field of that
	// role by name (PolicyInfo may be nil when the buffer has none).
	Observation, Action, PolicyInfo map[string]*tensor.Dense
	// NextObservation holds every observation field at t+1.
	NextObservation map[string]*tensor.Dense
	// Reward holds one finite reward per row.
	Reward []float32
	// IsDone holds one value per row: Running (0), Terminated (1) or
	// Truncated (2), as MATLAB's IsDone.
	IsDone []uint8
}

// ExperienceWriter appends MATLAB-style experiences to the rows it owns,
// storing them as TF-Agents trajectory steps so that AllExperiences (and
// every sampler) returns exactly what was appended:
//
//   - an experience (o, a, r, o', d) of a row is stored as the step holding
//     o and a, whose reward is r, whose next step type is Last when d is
//     Terminated or Truncated (Mid otherwise) and whose discount is 0 for
//     Terminated and 1 otherwise (IsDone 1 and 2 as AllExperiences maps
//     them back);
//   - o' is stored as the following step's observation. While the
//     episode goes on (d = Running) that step is provisional: the row's
//     next experience must start from the same observation (bytewise),
//     and fills in that step's action, policy info, reward, discount and
//     next step type instead of writing a new one. Until then the step
//     holds zeros, reward 0, discount 1 and step type Mid (no transition
//     starts there, as its successor is not stored). A next experience
//     whose observation differs is refused with ErrContinuity;
//   - at an episode end (d = 1 or 2) o' is stored as the boundary step
//     (step type Last, next step type First, zero action, reward 0,
//     discount 1), and the row's next experience starts a new episode
//     (step type First) from any observation.
//
// With ExperienceOptions.AnyOrder, an experience whose observation is not
// its row's provisional next observation is accepted (see AnyOrder).
//
// A new ExperienceWriter starts a new episode on every row. The buffer
// needs a capacity of at least 2 steps per row. Rows are owned as by a
// Writer (ErrRowOwned). An ExperienceWriter is not safe for concurrent
// use; different writers of one buffer are.
type ExperienceWriter struct {
	w        *Writer
	b        *Buffer
	anyOrder bool
	pending  []bool   // per buffer row: its newest step is a provisional next observation
	next     [][]byte // per buffer row: that step's observation bytes, fields in buffer order
	idx      []int64
}

// ExperienceOptions configure an ExperienceWriter (see
// NewExperienceWriterOptions). It is a plain value.
type ExperienceOptions struct {
	// AnyOrder accepts experiences in any order, as MATLAB's append
	// does, so that offline or shuffled data can be imported: an
	// experience whose observation is not its row's provisional next
	// observation (which Append otherwise refuses with ErrContinuity)
	// starts a fragment of its own, a new episode of one transition. The
	// provisional step it does not continue becomes a cut (its next step
	// type First, and no transition, n-step window or episode runs from it
	// into the next step; Stats does not count these cuts, as nothing
	// contradicts), so it still holds the previous experience's next
	// observation and AllExperiences, the samplers and n-step returns
	// give back every experience exactly as appended, each fragment's
	// n-step return stopping at its one transition.
	//
	// The cost is storage: a fragment takes two steps of its row (the
	// experience and its next observation), where an experience that
	// continues its row's episode takes one, so a row of capacity C holds
	// about C/2 shuffled experiences but about C in-order ones. An
	// experience whose observation equals (bytewise) its row's
	// provisional next observation still continues the episode, as
	// without AnyOrder: in-order data keeps its episodes and n-step
	// returns, and shuffled data whose observation happens to repeat the
	// previous next observation is joined to it.
	AnyOrder bool
}

// NewExperienceWriter returns an experience writer owning the given rows
// (all rows when none are given), with default options. It fails with
// ErrConfig for a buffer of capacity 1, and as NewWriter otherwise.
func (b *Buffer) NewExperienceWriter(rows ...int) (*ExperienceWriter, error) {
	return b.NewExperienceWriterOptions(ExperienceOptions{}, rows...)
}

// NewExperienceWriterOptions is NewExperienceWriter with options, such as
// one that takes experiences in any order:
//
//	ew, err := buf.NewExperienceWriterOptions(tensorbuf.ExperienceOptions{AnyOrder: true})
func (b *Buffer) NewExperienceWriterOptions(opts ExperienceOptions, rows ...int) (*ExperienceWriter, error) {
	if b.capacity < 2 {
		return nil, fmt.Errorf("%w: experiences need a capacity of at least 2 steps per row, the buffer has %d", ErrConfig, b.capacity)
	}
	w, err := b.NewWriter(rows...)
	if err != nil {
		return nil, err
	}
	return &ExperienceWriter{w: w, b: b, anyOrder: opts.AnyOrder, pending: make([]bool, b.numEnvs), next: make([][]byte, b.numEnvs)}, nil
}

// Rows returns the rows the writer owns.
func (ew *ExperienceWriter) Rows() []int { return ew.w.Rows() }

// Close releases the writer's rows. A provisional step (the next
// observation of an unfinished episode) stays stored; the next writer of
// its row starts a new episode.
func (ew *ExperienceWriter) Close() error { return ew.w.Close() }

// Append stores one experience per given row (see ExperienceWriter).
// It fails, writing nothing, with ErrRows (rows not owned, repeated, or
// slices of another length), ErrUnknownField (a name that is not a user
// field of that role), ErrMissingField, ErrDType or ErrShape (a tensor
// that does not fit), ErrInvalidArg (a reward that is not finite, an
// IsDone other than 0, 1 or 2) or, without AnyOrder, ErrContinuity (an
// observation that is not the previous experience's next observation of
// a row whose episode goes on). After validation it writes up to four
// backend calls; an error then (ErrClosed, ErrBackend) may leave part of
// it written.
func (ew *ExperienceWriter) Append(e *Experience) error {
	b, w := ew.b, ew.w
	if e == nil {
		return fmt.Errorf("%w: nil experience", ErrInvalidArg)
	}
	rows, err := w.checkRows(e.Rows, "experience")
	if err != nil {
		return err
	}
	n := len(rows)
	if len(e.Reward) != n || len(e.IsDone) != n {
		return fmt.Errorf("%w: %d rows but %d rewards and %d IsDone values", ErrRows, n, len(e.Reward), len(e.IsDone))
	}
	for i := range n {
		if !finite(e.Reward[i]) {
			return fmt.Errorf("%w: row %d: reward %v must be finite", ErrInvalidArg, rows[i], e.Reward[i])
		}
		if e.IsDone[i] > Truncated {
			return fmt.Errorf("%w: row %d: IsDone %d (want 0, 1 or 2)", ErrInvalidArg, rows[i], e.IsDone[i])
		}
	}
	// The raw bytes of every user field at t and of the observations at t+1.
	cur := make([][]byte, b.nUser)
	nxt := make([][]byte, b.nUser)
	maps := [3]map[string]*tensor.Dense{Observation: e.Observation, Action: e.Action, PolicyInfo: e.PolicyInfo}
	for role, m := range maps {
		if err := b.checkNames(m, Role(role), "experience "+Role(role).String()); err != nil {
			return err
		}
	}
	if err := b.checkNames(e.NextObservation, Observation, "experience next observation"); err != nil {
		return err
	}
	for i := range b.nUser {
		c := &b.cols[i]
		d := maps[c.Role][c.Name]
		if d == nil {
			return fmt.Errorf("%w: experience lacks %v field %q", ErrMissingField, c.Role, c.Name)
		}
		raw, err := hostBytes(d, c.Field, n)
		if err != nil {
			return err
		}
		cur[i] = raw
		if c.Role == Observation {
			d := e.NextObservation[c.Name]
			if d == nil {
				return fmt.Errorf("%w: experience lacks next observation %q", ErrMissingField, c.Name)
			}
			if nxt[i], err = hostBytes(d, c.Field, n); err != nil {
				return fmt.Errorf("next observation: %w", err)
			}
		}
	}
	// Continuity with the provisional steps.
	// Batch indices of rows that continue their provisional step, that
	// start an episode, and (AnyOrder) that leave their provisional step
	// for a fragment of their own.
	var filled, fresh, cut []int
	for k, r := range rows {
		if !ew.pending[r] {
			fresh = append(fresh, k)
			continue
		}
		if name := ew.differs(r, k, cur); name != "" {
			if !ew.anyOrder {
				return fmt.Errorf("%w: row %d: observation %q differs from the next observation of the row's previous experience (the episode goes on: IsDone was 0)",
					ErrContinuity, r, name)
			}
			fresh, cut = append(fresh, k), append(cut, k)
			continue
		}
		filled = append(filled, k)
	}

	if len(filled) > 0 {
		if err := ew.fill(rows, filled, cur, e); err != nil {
			return err
		}
	}
	if len(cut) > 0 {
		if err := ew.cutPending(rows, cut); err != nil {
			return err
		}
	}
	if len(fresh) > 0 {
		s := ew.stepOf(rows, fresh, cur, func(k int) (st, next StepType, rew, disc float32) {
			nt, dc := Mid, float32(1)
			if e.IsDone[k] != Running {
				nt = Last
			}
			if e.IsDone[k] == Terminated {
				dc = 0
			}
			return First, nt, e.Reward[k], dc
		}, false)
		if err := w.Add(s); err != nil {
			return err
		}
	}
	all := make([]int, n)
	for k := range all {
		all[k] = k
	}
	s := ew.stepOf(rows, all, nxt, func(k int) (st, next StepType, rew, disc float32) {
		if e.IsDone[k] != Running {
			return Last, First, 0, 1
		}
		return Mid, Mid, 0, 1
	}, true)
	if err := w.Add(s); err != nil {
		return err
	}
	for k, r := range rows {
		ew.pending[r] = e.IsDone[k] == Running
		ew.next[r] = ew.next[r][:0]
		if !ew.pending[r] {
			continue
		}
		for i := range b.nUser {
			if c := &b.cols[i]; c.Role == Observation {
				sb := int(c.stepBytes)
				ew.next[r] = append(ew.next[r], nxt[i][k*sb:(k+1)*sb]...)
			}
		}
	}
	return nil
}

// differs returns the name of the first observation field in which the
// observation of batch index k differs from row r's provisional next
// observation, or "" when none does.
func (ew *ExperienceWriter) differs(r, k int, cur [][]byte) string {
	b := ew.b
	off := 0
	for i := range b.nUser {
		c := &b.cols[i]
		if c.Role != Observation {
			continue
		}
		sb := int(c.stepBytes)
		if !bytes.Equal(cur[i][k*sb:(k+1)*sb], ew.next[r][off:off+sb]) {
			return c.Name
		}
		off += sb
	}
	return ""
}

// checkNames refuses names of m that are not user fields of the role.
func (b *Buffer) checkNames(m map[string]*tensor.Dense, role Role, what string) error {
	for name := range m {
		i, ok := b.byName[name]
		if !ok || b.cols[i].builtin || b.cols[i].Role != role {
			return fmt.Errorf("%w: %s %q is not a %v field of the buffer", ErrUnknownField, what, name, role)
		}
	}
	return nil
}

// stepOf builds the Step writing, for the batch indices sel of rows, the
// user fields from raw (observation fields only, zeros elsewhere, when
// obsOnly) and the built-in columns from meta.
func (ew *ExperienceWriter) stepOf(rows, sel []int, raw [][]byte, meta func(k int) (st, next StepType, rew, disc float32), obsOnly bool) *Step {
	b := ew.b
	s := &Step{Rows: make([]int, len(sel)), Values: make(map[string]*tensor.Dense, b.nUser)}
	for j, k := range sel {
		s.Rows[j] = rows[k]
		st, nt, rw, dc := meta(k)
		s.StepType = append(s.StepType, st)
		s.NextStepType = append(s.NextStepType, nt)
		s.Reward = append(s.Reward, rw)
		s.Discount = append(s.Discount, dc)
	}
	for i := range b.nUser {
		c := &b.cols[i]
		d := tensor.New(tensor.Of(c.DType.Tensor()), tensor.WithShape(append([]int{len(sel)}, c.Shape...)...))
		if !obsOnly || c.Role == Observation {
			sb := int(c.stepBytes)
			for j, k := range sel {
				copy(d.Raw[j*sb:(j+1)*sb], raw[i][k*sb:(k+1)*sb])
			}
		}
		s.Values[c.Name] = d
	}
	return s
}

// fill completes the provisional steps of the rows at batch indices sel:
// their action and policy info fields, reward, discount and next step
// type, in one scatter.
func (ew *ExperienceWriter) fill(rows, sel []int, cur [][]byte, e *Experience) error {
	b := ew.b
	var cols []Column
	var src [][]byte
	for i := range b.nUser {
		c := &b.cols[i]
		if c.Role == Observation {
			continue
		}
		sb := int(c.stepBytes)
		buf := make([]byte, 0, len(sel)*sb)
		for _, k := range sel {
			buf = append(buf, cur[i][k*sb:(k+1)*sb]...)
		}
		cols, src = append(cols, b.ring[i]), append(src, buf)
	}
	next := make([]StepType, len(sel))
	rew := make([]float32, len(sel))
	disc := make([]float32, len(sel))
	for j, k := range sel {
		next[j], rew[j], disc[j] = Mid, e.Reward[k], 1
		if e.IsDone[k] != Running {
			next[j] = Last
		}
		if e.IsDone[k] == Terminated {
			disc[j] = 0
		}
	}
	cols = append(cols, b.ring[b.nUser+colNextStepType], b.ring[b.nUser+colReward], b.ring[b.nUser+colDiscount])
	src = append(src, rawbytes.Of(next), rawbytes.Of(rew), rawbytes.Of(disc))

	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ew.scatterPendingLocked(rows, sel, cols, src); err != nil {
		return err
	}
	for j, ix := range ew.idx {
		m := b.meta[ix] &^ (metaNextMask | metaDiscZero)
		m |= uint8(next[j]) << metaNextShift
		if disc[j] == 0 {
			m |= metaDiscZero
		}
		b.meta[ix] = m
	}
	return nil
}

// scatterPendingLocked writes src into cols at the provisional (latest)
// steps of the rows at batch indices sel, leaving their slots in ew.idx.
// The caller holds b.mu for writing.
func (ew *ExperienceWriter) scatterPendingLocked(rows, sel []int, cols []Column, src [][]byte) error {
	b := ew.b
	if b.closed || ew.w.closed {
		return fmt.Errorf("%w: Append", ErrClosed)
	}
	ew.idx = ew.idx[:0]
	for _, k := range sel {
		r := rows[k]
		ew.idx = append(ew.idx, b.slot(r, b.cursor[r]-1))
	}
	if err := b.beforeRingWrite(ew.idx); err != nil {
		return err
	}
	if err := b.be.Scatter(cols, src, ew.idx); err != nil {
		return fmt.Errorf("%w: scatter: %w", ErrBackend, err)
	}
	return nil
}

// cutPending ends the provisional steps of the rows at batch indices sel
// (AnyOrder: their next experiences start fragments of their own): each
// gets next step type First, in one scatter, and becomes a cut, so that
// no transition runs from it into the fragment's first step and Add sees
// nothing to contradict.
func (ew *ExperienceWriter) cutPending(rows, sel []int) error {
	b := ew.b
	next := make([]StepType, len(sel))
	for j := range next {
		next[j] = First
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ew.scatterPendingLocked(rows, sel, []Column{b.ring[b.nUser+colNextStepType]}, [][]byte{rawbytes.Of(next)}); err != nil {
		return err
	}
	for _, ix := range ew.idx {
		b.meta[ix] = b.meta[ix]&^metaNextMask | uint8(First)<<metaNextShift | metaCut
	}
	return nil
}
