package tensorbuf

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// Step is one batched trajectory step for some env rows, in TF-Agents'
// layout. Writer.Add only reads it (and not after it returns), so a Step
// and its host tensors can be reused for the next add; it must not change
// during the call. Device tensors in Values are read on the device by the
// work Add queues, after it returns: see Writer.Add for when they may be
// overwritten.
//
// It holds a TF-Agents Trajectory for each row: the observation, action
// and policy info at t with StepType at t, and NextStepType, Reward and
// Discount from t+1.
type Step struct {
	// Rows are the env rows written, in the order of the data; nil means
	// all of the writer's rows in the writer's order. A subset is a
	// partial add, as asynchronous collectors produce.
	Rows []int
	// StepType, NextStepType, Reward and Discount hold one value per row.
	StepType     []StepType
	NextStepType []StepType
	Reward       []float32
	Discount     []float32
	// Values holds every user field by name, shaped [len(rows), ...shape],
	// contiguous: host tensors, or device tensors of the buffer's backend
	// (see Writer.Add), in any mix.
	Values map[string]*tensor.Dense
	// Fields, when not nil, holds the user fields instead of Values, by
	// position: Fields[i] is field i of Buffer.Fields, shaped as in Values.
	// It spares an add the lookups by name, as a collector that reuses one
	// Step does not need them; a step may not set both (ErrInvalidArg).
	Fields []*tensor.Dense
}

// Writer adds steps to the env rows it owns. Rows are never shared by
// two writers, so several collectors can fill one buffer at once, each
// with its own writer. A Writer is not safe for concurrent use; different
// writers of one buffer are.
type Writer struct {
	b      *Buffer
	rows   []int
	own    []bool // own[row] for rows of the buffer
	strict bool
	closed bool

	idx  []int64
	src  [][]byte
	dev  []*tensor.Dense // device sources by column (nil: host, in src)
	seen []int           // scratch: row -> add number, for duplicate detection
	gen  int
}

// WriterOptions configures a Writer (see NewWriterOptions). It is a plain
// value.
type WriterOptions struct {
	// Strict refuses, with ErrStepType, a step whose StepType contradicts
	// the NextStepType of the previous step stored in its row. By default
	// such a step is written and the previous step becomes a cut: no
	// transition, n-step window or episode runs across it, and the buffer's
	// Stats count it.
	Strict bool
}

// NewWriter returns a writer owning the given rows (all rows when none are
// given), with default options. It fails with ErrRowOwned if another open
// writer owns one of them, or ErrRows for a row out of range or repeated.
func (b *Buffer) NewWriter(rows ...int) (*Writer, error) {
	return b.NewWriterOptions(WriterOptions{}, rows...)
}

// NewWriterOptions is NewWriter with options, such as a strict writer:
//
//	w, err := buf.NewWriterOptions(tensorbuf.WriterOptions{Strict: true})
func (b *Buffer) NewWriterOptions(opts WriterOptions, rows ...int) (*Writer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("%w: NewWriter", ErrClosed)
	}
	if len(rows) == 0 {
		rows = make([]int, b.numEnvs)
		for i := range rows {
			rows[i] = i
		}
	}
	own := make([]bool, b.numEnvs)
	for _, r := range rows {
		if r < 0 || r >= b.numEnvs {
			return nil, fmt.Errorf("%w: row %d of %d", ErrRows, r, b.numEnvs)
		}
		if own[r] {
			return nil, fmt.Errorf("%w: row %d given twice", ErrRows, r)
		}
		if b.owner[r] != nil {
			return nil, fmt.Errorf("%w: row %d", ErrRowOwned, r)
		}
		own[r] = true
	}
	w := &Writer{
		b:      b,
		rows:   append([]int(nil), rows...),
		own:    own,
		strict: opts.Strict,
		idx:    make([]int64, 0, len(rows)),
		src:    make([][]byte, len(b.cols)),
		dev:    make([]*tensor.Dense, len(b.cols)),
		seen:   make([]int, b.numEnvs),
	}
	for _, r := range rows {
		b.owner[r] = w
	}
	return w, nil
}

// Rows returns the rows the writer owns.
func (w *Writer) Rows() []int { return append([]int(nil), w.rows...) }

// Close releases the writer's rows for another writer.
func (w *Writer) Close() error {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if w.closed {
		return fmt.Errorf("%w: writer closed twice", ErrClosed)
	}
	w.closed = true
	for _, r := range w.rows {
		if w.b.owner[r] == w {
			w.b.owner[r] = nil
		}
	}
	return nil
}

// Add writes one batched step: every field of every given row in one
// backend call. Each row's cursor advances by one; in a full row the
// oldest step is overwritten, and items of the buffer's tables that start
// at the overwritten step are removed first.
//
// Reward and Discount must be finite, and step types First, Mid or Last
// (ErrInvalidArg). A step whose StepType is not the NextStepType of the
// previous step of its row makes that previous step a cut (counted in the
// buffer's Stats), or is refused with ErrStepType by a strict writer.
//
// Add validates everything before writing: on error nothing is written.
//
// Device sources. A field tensor may be a device tensor of the buffer's
// own backend (in cuda builds, one viewing memory of the buffer's
// gpu.Backend: Tensor over an arena from its Alloc, or a batch it
// sampled), as a GPU-resident environment or a learner holds its step:
// the backend's one scatter launch then reads it on the device, with no
// host copy of its bytes (see DeviceScatterer); the built-in columns are
// host slices and are staged as always, and device and host fields mix
// freely. A device tensor the backend cannot read in place (another
// backend's, even on the same GPU, memory from outside trajring, a freed
// arena) is refused with ErrForeignTensor, one of the wrong dtype or
// shape with ErrDType or ErrShape, and a backend that reads no device
// sources refuses every device tensor with ErrDeviceTensor; a refused Add
// writes nothing. Ordering: the scatter is queued on the backend's stream
// after all work queued there before Add, so it reads what that work
// wrote (kernels launched on Streamer.Stream, Backend.Upload). A producer
// writing on another stream must make the backend's stream wait for it
// before Add (record an event on its stream after the write, then
// Streamer.WaitHandle), and must not overwrite the sources until the
// scatter has run (Streamer.Record an event after Add and make its stream
// wait on it).
func (w *Writer) Add(s *Step) error {
	if w.b.hostRows != nil && s != nil {
		if done, err := w.addHostRow(s); done { // writer_host.go
			return err
		}
	}
	return w.add(s, 1)
}

// AddSteps writes k consecutive batched steps of the same rows in one
// backend call, exactly as k successive Adds would (cuts, evictions,
// Stats): step j of the i-th row written is element j*n+i (time-major, n
// the number of rows written) of StepType, NextStepType, Reward and
// Discount, and step j*n+i of every field tensor, shaped [k*n, field
// shape...]. k must be in [1, Capacity] (ErrInvalidArg): more would
// overwrite steps of the same call. A strict writer also checks each
// step's StepType against the NextStepType of the same row's step before
// it in the call. Everything else is as for Add, device sources included;
// on error nothing is written. It serves producers that batch several
// steps per row, such as the remote ingester's frames.
func (w *Writer) AddSteps(s *Step, k int) error {
	if k < 1 || int64(k) > w.b.capacity {
		return fmt.Errorf("%w: %d steps per row, capacity %d", ErrInvalidArg, k, w.b.capacity)
	}
	return w.add(s, k)
}

// add is Add of k steps per row (AddSteps).
func (w *Writer) add(s *Step, k int) error {
	rows, devices, err := w.stage(s, k)
	if err != nil {
		return err
	}
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || w.closed {
		return fmt.Errorf("%w: Add", ErrClosed)
	}
	if w.strict {
		if err := w.checkStepTypesLocked(s, rows); err != nil {
			return err
		}
	}
	return w.commitLocked(s, rows, k, devices)
}

// stage validates s as k steps of its rows and points w.src (and w.dev,
// for device tensors) at the bytes of each column, without locking the
// buffer. It returns the rows and whether any field is a device tensor.
func (w *Writer) stage(s *Step, k int) (rows []int, devices bool, err error) {
	b := w.b
	if s == nil {
		return nil, false, fmt.Errorf("%w: nil step", ErrInvalidArg)
	}
	rows, err = w.checkRows(s.Rows, "step")
	if err != nil {
		return nil, false, err
	}
	n := len(rows)
	m := n * k // k <= capacity and n <= NumEnvs: the ring's steps bound it
	if len(s.StepType) != m || len(s.NextStepType) != m || len(s.Reward) != m || len(s.Discount) != m {
		return nil, false, fmt.Errorf("%w: %d rows × %d steps but %d step types, %d next step types, %d rewards, %d discounts",
			ErrRows, n, k, len(s.StepType), len(s.NextStepType), len(s.Reward), len(s.Discount))
	}
	for x := range m {
		if !validStepType(s.StepType[x]) || !validStepType(s.NextStepType[x]) {
			return nil, false, fmt.Errorf("%w: row %d: step types %d, %d", ErrInvalidArg, rows[x%n], s.StepType[x], s.NextStepType[x])
		}
		if !finite(s.Reward[x]) || !finite(s.Discount[x]) {
			return nil, false, fmt.Errorf("%w: row %d: reward %v and discount %v must be finite", ErrInvalidArg, rows[x%n], s.Reward[x], s.Discount[x])
		}
	}
	switch {
	case s.Fields != nil && s.Values != nil:
		return nil, false, fmt.Errorf("%w: step sets both Values and Fields", ErrInvalidArg)
	case len(s.Fields) > b.nUser:
		return nil, false, fmt.Errorf("%w: %d fields, the buffer has %d", ErrUnknownField, len(s.Fields), b.nUser)
	case len(s.Values) != b.nUser:
		for name := range s.Values {
			if i, ok := b.byName[name]; !ok || b.cols[i].builtin {
				return nil, false, fmt.Errorf("%w: %q", ErrUnknownField, name)
			}
		}
	}
	for i := range b.nUser {
		c := &b.cols[i]
		var d *tensor.Dense
		if s.Fields != nil {
			if i < len(s.Fields) {
				d = s.Fields[i]
			}
		} else {
			d = s.Values[c.Name]
		}
		if d == nil {
			return nil, false, fmt.Errorf("%w: step lacks field %q", ErrMissingField, c.Name)
		}
		if !d.IsNativelyAccessible() {
			if err := w.deviceSource(d, c.Field, m); err != nil {
				return nil, false, err
			}
			w.src[i], w.dev[i] = nil, d
			devices = true
			continue
		}
		raw, err := columnBytes(d, c, m)
		if err != nil {
			return nil, false, err
		}
		w.src[i], w.dev[i] = raw, nil
	}
	w.src[b.nUser+colStepType] = rawbytes.Of(s.StepType)
	w.src[b.nUser+colNextStepType] = rawbytes.Of(s.NextStepType)
	w.src[b.nUser+colReward] = rawbytes.Of(s.Reward)
	w.src[b.nUser+colDiscount] = rawbytes.Of(s.Discount)
	return rows, devices, nil
}

// checkStepTypesLocked refuses, for a strict writer, a step whose step
// type is not the next step type of the step before it in its row (the
// row's last stored step, or the previous step of this add).
func (w *Writer) checkStepTypesLocked(s *Step, rows []int) error {
	b, n := w.b, len(rows)
	for x := range len(s.StepType) {
		r := rows[x%n]
		pos := b.cursor[r] + int64(x/n)
		var want StepType
		switch {
		case x >= n:
			want = s.NextStepType[x-n]
		case pos > 0:
			want = StepType((b.meta[b.slot(r, pos-1)] & metaNextMask) >> metaNextShift)
		default:
			continue
		}
		if want != s.StepType[x] {
			return fmt.Errorf("%w: row %d: step %d has step type %v, the previous step's next step type is %v",
				ErrStepType, r, pos, s.StepType[x], want)
		}
	}
	return nil
}

// commitLocked writes the staged steps into the ring: it finds their
// slots, scatters the columns, drops the items whose first step it
// overwrites and records each step's metadata, cuts and stats.
func (w *Writer) commitLocked(s *Step, rows []int, k int, devices bool) error {
	b, n := w.b, len(rows)
	w.idx = w.idx[:0]
	for j := range int64(k) {
		for _, r := range rows {
			w.idx = append(w.idx, b.slot(r, b.cursor[r]+j))
		}
	}
	if err := b.beforeRingWrite(w.idx); err != nil {
		return err
	}
	if err := w.scatter(devices); err != nil {
		return err
	}
	// Drop the items whose first step this add overwrites: each table is
	// locked once per add, not once per row (rows are distinct, so each
	// table removes what it removed row by row before, in the same order).
	// Step by step, as k Adds would: evict, then record each row's step.
	for j := range k {
		for _, t := range b.tableList {
			t.evictRows(rows, b.cursor)
		}
		for i, r := range rows {
			w.recordLocked(s, j*n+i, r, w.idx[j*n+i])
		}
	}
	b.stats.Steps += int64(n * k)
	return nil
}

// recordLocked records step x of s (in row r, at slot ix) as the
// row's next step: its metadata byte, a cut where its step type is not
// the next step type of the step before it, and the row's cursor.
func (w *Writer) recordLocked(s *Step, x, r int, ix int64) {
	b := w.b
	pos := b.cursor[r]
	mt := uint8(s.StepType[x]) | uint8(s.NextStepType[x])<<metaNextShift
	if s.Discount[x] == 0 {
		mt |= metaDiscZero
	}
	if pos > 0 {
		// The slot of pos-1 without a division: the slot before pos's,
		// or the row's last when pos's is the row's first.
		ps := ix - 1
		if ps < int64(r)*b.capacity {
			ps += b.capacity
		}
		prev := &b.meta[ps]
		if StepType((*prev&metaNextMask)>>metaNextShift) != s.StepType[x] {
			*prev |= metaCut
			b.stats.Cuts++
			// The transition at pos-1 is lost unless pos-1 is a boundary
			// step (which starts none) or is overwritten by this add
			// (capacity 1).
			if StepType(*prev&metaStepMask) != Last && b.capacity > 1 {
				b.stats.DroppedTransitions++
			}
		}
	}
	b.meta[ix] = mt
	b.cursor[r] = pos + 1
}

// scatter writes the sources Add prepared to w.idx, from device tensors
// in place when there are any, and lets go of the sources. It runs with
// b.mu held.
func (w *Writer) scatter(devices bool) error {
	b := w.b
	var err error
	switch {
	case devices:
		// deviceSource checked that the backend is a DeviceScatterer.
		err = b.be.(DeviceScatterer).ScatterFrom(b.ring, w.src, w.dev, w.idx)
	default:
		err = b.be.Scatter(b.ring, w.src, w.idx)
	}
	clear(w.src)
	if devices {
		clear(w.dev) // without device sources every entry is nil already
	}
	if err != nil {
		return fmt.Errorf("%w: scatter: %w", ErrBackend, err)
	}
	return nil
}

// checkRows returns the rows a call writes (given, or all the writer's
// rows when given is nil) after checking that each is the writer's and
// appears once; what names the call's argument in errors.
func (w *Writer) checkRows(given []int, what string) ([]int, error) {
	rows := given
	if rows == nil {
		rows = w.rows
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s with no rows", ErrRows, what)
	}
	w.gen++
	for _, r := range rows {
		if r < 0 || r >= w.b.numEnvs || !w.own[r] {
			return nil, fmt.Errorf("%w: row %d is not the writer's", ErrRows, r)
		}
		if w.seen[r] == w.gen {
			return nil, fmt.Errorf("%w: row %d given twice", ErrRows, r)
		}
		w.seen[r] = w.gen
	}
	return rows, nil
}

func validStepType(s StepType) bool { return s == First || s == Mid || s == Last }

// finite reports whether v is neither NaN nor infinite (its exponent
// bits are not all ones).
func finite(v float32) bool { return math.Float32bits(v)&0x7f800000 != 0x7f800000 }

// hostBytes returns the bytes of a contiguous host tensor after checking
// its dtype and shape against a field for n rows.
func hostBytes(d *tensor.Dense, f Field, n int) ([]byte, error) {
	if err := hostTensor(d, f.Name); err != nil {
		return nil, err
	}
	if d.Dtype() != f.DType.Tensor() {
		return nil, fmt.Errorf("%w: field %q is %v, got %v", ErrDType, f.Name, f.DType, d.Dtype())
	}
	if err := checkShape(f, n, d.Shape()); err != nil {
		return nil, err
	}
	if d.RequiresIterator() {
		return nil, fmt.Errorf("%w: field %q: tensor is a non-contiguous view", ErrShape, f.Name)
	}
	want := n * f.StepBytes()
	raw := d.Header.Raw
	if len(raw) < want {
		return nil, fmt.Errorf("%w: field %q: %d bytes for %d", ErrShape, f.Name, len(raw), want)
	}
	return raw[:want], nil
}

// columnBytes is hostBytes for a column of the buffer, with the same
// checks in the same order: Writer.add calls it per field and add, where
// copying the column's Field (hostBytes, checkShape and StepBytes take it
// by value) cost more than the checks; only a tensor denseBytes does not
// take copies it.
func columnBytes(d *tensor.Dense, c *column, n int) ([]byte, error) {
	if raw, ok := denseBytes(d, c.tdt, c.Shape, n, int64(n)*c.stepBytes); ok {
		return raw, nil
	}
	return hostBytes(d, c.Field, n)
}

// denseBytes returns the first want bytes of d when d is a host tensor
// of dtype dt shaped [n, shape...] that passes hostBytes' checks without
// its slow ones: contiguous, neither a view, lazily transposed nor masked
// (RequiresIterator's conditions, without its two divisions of the data
// length by the element size through reflect). For anything else it
// reports false, and hostBytes decides exactly.
func denseBytes(d *tensor.Dense, dt tensor.Dtype, shape []int, n int, want int64) ([]byte, bool) {
	if d == nil || !d.IsNativelyAccessible() || d.Dtype() != dt {
		return nil, false
	}
	got := d.Shape()
	if len(got) != len(shape)+1 || got[0] != n {
		return nil, false
	}
	for i, v := range shape {
		if got[i+1] != v {
			return nil, false
		}
	}
	if d.IsMaterializable() || !d.DataOrder().IsContiguous() || d.Mask() != nil {
		return nil, false
	}
	raw := d.Header.Raw
	if int64(len(raw)) < want {
		return nil, false
	}
	return raw[:want], true
}
