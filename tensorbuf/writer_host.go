package tensorbuf

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/tensor"
)

// Single-row adds to host rings.
//
// An Add of one step of one row (one env per actor, the common case) is
// mostly per-call work around a copy of one step. When every ring arena
// is host memory (hostArena, as the cpu backend's are), Add takes
// addHostRow: it checks what that one step needs and copies it itself
// from a plan made at New, instead of staging every column for
// Backend.Scatter, which validates each column's layout and every index
// again on every call: here the buffer made the layout and the slot.
// Whatever addHostRow does not accept (a failed check, a device tensor,
// a view that needs hostBytes' exact checks) goes to the general add,
// which validates again and returns the error, so both paths refuse the
// same steps with the same errors. Adds of several rows or steps go
// through the backend (its non-temporal stores serve large scatters).

// hostRow is a column's ring as the single-row path writes it: step slot
// k's bytes are ring[k*stride+off : k*stride+off+size]. For a user
// column it also holds what the path checks a field against, so that an
// add reads one struct per field rather than the column, its shape and
// its ring.
type hostRow struct {
	ring   []byte
	stride int64
	off    int64
	size   int64
	dt     tensor.Dtype
	ndim   int
	shape  [maxHostRowDims]int // a step's shape: shape[:ndim]
}

// hostRows is the plan of the single-row path: each user column, and the
// four built-in columns as one 16-byte run of the record arena
// (planLayout packs them in order, all four bytes wide).
type hostRows struct {
	user    []hostRow
	builtin hostRow
}

// Buffers with more user fields, or a field of more dimensions, take the
// general add: addHostRow keeps its fields' bytes on its stack, and each
// field's shape in its hostRow.
const (
	maxHostRowFields = 8
	maxHostRowDims   = 4
)

// planHostRows sets b.hostRows when every column's arena is host memory
// and the built-in columns lie in one 16-byte run; otherwise it leaves
// it nil and every add uses the backend.
func (b *Buffer) planHostRows() {
	if noHostRows || b.nUser > maxHostRowFields {
		return
	}
	rows := make([]hostRow, len(b.ring))
	for c := range b.ring {
		col := &b.ring[c]
		a, ok := col.Ring.(hostArena)
		if !ok || len(b.cols[c].Shape) > maxHostRowDims {
			return
		}
		ring := a.Bytes()
		if steps, ok := col.RingSteps(int64(len(ring))); !ok || steps < int64(b.numEnvs)*b.capacity {
			return // not a layout this path can trust: let the backend refuse it
		}
		h := hostRow{ring: ring, stride: col.RingStride(), off: col.Offset, size: col.StepBytes,
			dt: b.cols[c].tdt, ndim: len(b.cols[c].Shape)}
		copy(h.shape[:], b.cols[c].Shape)
		rows[c] = h
	}
	bi := rows[b.nUser:]
	for k := range bi {
		if bi[k].size != 4 || bi[k].off != bi[0].off+4*int64(k) || bi[k].stride != bi[0].stride ||
			unsafe.SliceData(bi[k].ring) != unsafe.SliceData(bi[0].ring) {
			return
		}
	}
	run := bi[0]
	run.size = 4 * numBuiltin
	b.hostRows = &hostRows{user: rows[:b.nUser], builtin: run}
}

// noHostRows, set by tests, makes new buffers write every add through the
// backend, the reference the single-row path is checked against.
var noHostRows bool

// addHostRow is Add of a step of one row to a buffer with b.hostRows. It
// reports false, having changed nothing, for a step it does not take;
// Add then gives the step to the general add. Otherwise its error is
// Add's (a closed buffer, a strict writer's step type, a checkpoint's
// copy-on-write).
func (w *Writer) addHostRow(s *Step) (bool, error) {
	b := w.b
	if len(s.StepType) != 1 || len(s.NextStepType) != 1 || len(s.Reward) != 1 || len(s.Discount) != 1 ||
		!validStepType(s.StepType[0]) || !validStepType(s.NextStepType[0]) || !finite(s.Reward[0]) || !finite(s.Discount[0]) {
		return false, nil
	}
	rows := s.Rows
	if rows == nil {
		rows = w.rows
	}
	if len(rows) != 1 {
		return false, nil
	}
	r := rows[0]
	if r < 0 || r >= len(w.own) || !w.own[r] {
		return false, nil
	}
	// The user fields' bytes, on the stack: nothing to clear afterwards.
	var src [maxHostRowFields][]byte
	user := b.hostRows.user
	switch {
	case s.Fields != nil:
		if s.Values != nil || len(s.Fields) != len(user) {
			return false, nil
		}
		for i, d := range s.Fields {
			h := &user[i]
			raw, ok := denseBytes(d, h.dt, h.shape[:h.ndim], 1, h.size)
			if !ok {
				return false, nil
			}
			src[i] = raw
		}
	default:
		if len(s.Values) != len(user) {
			return false, nil
		}
		for i := range user {
			h := &user[i]
			raw, ok := denseBytes(s.Values[b.cols[i].Name], h.dt, h.shape[:h.ndim], 1, h.size)
			if !ok {
				return false, nil
			}
			src[i] = raw
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || w.closed {
		return true, fmt.Errorf("%w: Add", ErrClosed)
	}
	if w.strict {
		if err := w.checkStepTypesLocked(s, rows); err != nil {
			return true, err
		}
	}
	ix := b.slot(r, b.cursor[r])
	if b.ckpt.cow != nil || b.file != nil {
		w.idx = append(w.idx[:0], ix)
		if err := b.beforeRingWrite(w.idx); err != nil {
			return true, err
		}
	}
	for i := range user {
		h := &user[i]
		o := ix*h.stride + h.off
		if h.size == 4 {
			binary.NativeEndian.PutUint32(h.ring[o:o+4], binary.NativeEndian.Uint32(src[i]))
			continue
		}
		copy(h.ring[o:o+h.size], src[i])
	}
	h := &b.hostRows.builtin
	o := ix*h.stride + h.off
	bi := h.ring[o : o+4*numBuiltin]
	binary.NativeEndian.PutUint32(bi[4*colStepType:], uint32(s.StepType[0]))
	binary.NativeEndian.PutUint32(bi[4*colNextStepType:], uint32(s.NextStepType[0]))
	binary.NativeEndian.PutUint32(bi[4*colReward:], math.Float32bits(s.Reward[0]))
	binary.NativeEndian.PutUint32(bi[4*colDiscount:], math.Float32bits(s.Discount[0]))
	for _, t := range b.tableList {
		t.evictRows(rows, b.cursor)
	}
	w.recordLocked(s, 0, r, ix)
	b.stats.Steps++
	return true, nil
}
