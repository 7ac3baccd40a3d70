package remote

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// The default observer's fast path. Without an ObserverFactory the
// Ingester creates no item, so it writes an actor's steps with a
// tensorbuf.Writer of its own instead of through an observer.Shared
// group: a frame whose steps are all new becomes one Writer.AddSteps of
// its K steps, and otherwise each step one Writer.Add of the rows that
// still need it; the user fields are the frame's own bytes (time-major,
// step k of the frame's rows is one contiguous block in the frame's row
// order), with no trajectory to build and check per step. The buffer receives exactly the steps, cuts
// and stats of the observer path (TestPlainWriterMatchesObserver);
// BenchmarkIngestWrite compares the two.

// plainWriter writes an actor's steps straight into its buffer rows. Not
// safe for concurrent use (the Ingester holds its lock).
type plainWriter struct {
	w        *tensorbuf.Writer
	fields   []tensorbuf.Field // schema order
	rows     []int             // buffer rows, one per local row
	step     tensorbuf.Step
	n        int        // rows of the tensors in step.Values (0: none yet)
	vals     []plainCol // per user field, schema order, shaped [n, ...]
	sel      []int      // frame row indexes of the step being written
	stepRows []int      // step.Rows' memory
	capacity int        // the buffer's steps per row: AddSteps' bound on K
}

// plainCol is a user field's tensor of a step and its own memory (the
// tensor points at frame bytes while a step is written).
type plainCol struct {
	d   *tensor.Dense
	own []byte
}

func newPlainWriter(buf *tensorbuf.Buffer, fields []tensorbuf.Field, rows []int) (*plainWriter, error) {
	w, err := buf.NewWriter(rows...)
	if err != nil {
		return nil, err
	}
	return &plainWriter{w: w, fields: fields, rows: rows, step: tensorbuf.Step{Values: map[string]*tensor.Dense{}},
		capacity: buf.Capacity()}, nil
}

// shape makes the step's user-field tensors n rows long.
func (p *plainWriter) shape(n int) {
	if p.n == n {
		return
	}
	p.n = n
	p.vals = p.vals[:0]
	for _, f := range p.fields {
		d := tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(append([]int{n}, f.Shape...)...))
		p.vals = append(p.vals, plainCol{d: d, own: d.Header.Raw})
		p.step.Values[f.Name] = d
	}
	s := &p.step
	s.StepType, s.NextStepType = make([]tensorbuf.StepType, n), make([]tensorbuf.StepType, n)
	s.Reward, s.Discount = make([]float32, n), make([]float32, n)
	p.stepRows = make([]int, n)
	s.Rows = p.stepRows
}

// Observe writes the active rows of one batched step (the RowObserver
// method; the Ingester itself calls writeFrame).
func (p *plainWriter) Observe(t *driver.Trajectory) error {
	if t == nil || t.BatchSize() != len(p.rows) {
		return fmt.Errorf("%w: trajectory of %d rows", ErrFrame, len(p.rows))
	}
	p.sel = p.sel[:0]
	for i := range p.rows {
		if t.IsActive(i) {
			p.sel = append(p.sel, i)
		}
	}
	if len(p.sel) == 0 {
		return nil
	}
	p.shape(len(p.sel))
	s := &p.step
	for j, i := range p.sel {
		s.Rows[j] = p.rows[i]
		s.StepType[j], s.NextStepType[j] = t.StepType[i], t.NextStepType[i]
		s.Reward[j], s.Discount[j] = t.Reward[i], t.Discount[i]
	}
	for c, f := range p.fields {
		src := source(t, f)
		if src == nil || len(src.Header.Raw) < len(p.rows)*f.StepBytes() {
			return fmt.Errorf("%w: trajectory field %q", ErrFrame, f.Name)
		}
		sb, dst := f.StepBytes(), p.vals[c].own
		for j, i := range p.sel {
			copy(dst[j*sb:(j+1)*sb], src.Header.Raw[i*sb:(i+1)*sb])
		}
	}
	return p.w.Add(s)
}

// Close closes the writer (its rows may get another writer).
func (p *plainWriter) Close() error { return p.w.Close() }

// writeFrame writes the steps of a decoded frame that are not written
// yet (next: the actor's next step per local row); it returns the row
// steps written and dropped as duplicates, and the number of failed adds.
func (p *plainWriter) writeFrame(f *Frame, next []int64, nc int) (written, dups, failed int) {
	r := len(f.Rows)
	if p.whole(f, next) {
		return r * f.K, 0, p.writeWhole(f, nc)
	}
	s := &p.step
	le := binary.LittleEndian
	for k := range f.K {
		p.sel = p.sel[:0]
		for i, row := range f.Rows {
			if f.First[i]+int64(k) >= next[row] {
				p.sel = append(p.sel, i)
			}
		}
		n := len(p.sel)
		dups += r - n
		if n == 0 {
			continue
		}
		p.shape(n)
		for c := range p.vals {
			sb := f.Cols[c]
			stepBytes := len(sb) / (f.K * r)
			src := sb[k*r*stepBytes : (k+1)*r*stepBytes]
			d := p.vals[c].d
			if n == r {
				d.Header.Raw = src // the frame's own bytes, in its row order
				continue
			}
			d.Header.Raw = p.vals[c].own
			for j, i := range p.sel {
				copy(d.Header.Raw[j*stepBytes:(j+1)*stepBytes], src[i*stepBytes:(i+1)*stepBytes])
			}
		}
		o := k * r * 4
		for j, i := range p.sel {
			s.Rows[j] = p.rows[f.Rows[i]]
			b := o + 4*i
			s.StepType[j] = tensorbuf.StepType(int32(le.Uint32(f.Cols[nc][b:])))
			s.NextStepType[j] = tensorbuf.StepType(int32(le.Uint32(f.Cols[nc+1][b:])))
			s.Reward[j] = math.Float32frombits(le.Uint32(f.Cols[nc+2][b:]))
			s.Discount[j] = math.Float32frombits(le.Uint32(f.Cols[nc+3][b:]))
		}
		if err := p.w.Add(s); err != nil {
			failed++
		}
		written += n
	}
	// Frame bytes are not kept past the message.
	for c := range p.vals {
		p.vals[c].d.Header.Raw = p.vals[c].own
	}
	return written, dups, failed
}

// whole reports whether every step of the frame is new (no row has
// written any of them before) and the frame fits AddSteps.
func (p *plainWriter) whole(f *Frame, next []int64) bool {
	if f.K > p.capacity {
		return false
	}
	for i, row := range f.Rows {
		if f.First[i] < next[row] {
			return false
		}
	}
	return true
}

// writeWhole writes all K steps of every row of the frame with one
// Writer.AddSteps: the frame's columns are already time-major, so the
// user fields are its own bytes. It returns 1 when the add failed (it
// writes nothing then; Decode has already refused what Add would). One
// call for the frame, not one per step, because the per-call work of Add
// was a third of the time of a row step.
func (p *plainWriter) writeWhole(f *Frame, nc int) (failed int) {
	r, m := len(f.Rows), len(f.Rows)*f.K
	s := &p.step
	le := binary.LittleEndian
	p.shape(m)
	for c := range p.vals {
		p.vals[c].d.Header.Raw = f.Cols[c]
	}
	for i := range r {
		s.Rows[i] = p.rows[f.Rows[i]]
	}
	all := s.Rows
	s.Rows = s.Rows[:r]
	for x := range m {
		b := 4 * x
		s.StepType[x] = tensorbuf.StepType(int32(le.Uint32(f.Cols[nc][b:])))
		s.NextStepType[x] = tensorbuf.StepType(int32(le.Uint32(f.Cols[nc+1][b:])))
		s.Reward[x] = math.Float32frombits(le.Uint32(f.Cols[nc+2][b:]))
		s.Discount[x] = math.Float32frombits(le.Uint32(f.Cols[nc+3][b:]))
	}
	if err := p.w.AddSteps(s, f.K); err != nil {
		failed = 1
	}
	s.Rows = all
	// Frame bytes are not kept past the message.
	for c := range p.vals {
		p.vals[c].d.Header.Raw = p.vals[c].own
	}
	return failed
}
