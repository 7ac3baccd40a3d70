package remote

import (
	"encoding/binary"
	"math"

	"github.com/trajring/trajring/tensorbuf"
)

// Writing a decoded frame into the buffer: the cut before a gap, then
// the steps through the actor's observer.

// cut makes the rows of a frame that skip steps into cuts: the actor's
// observer starts afresh (no item spans the gap) and the buffer marks each
// such row's newest step as a cut unless the frame's first step already
// contradicts it (then the write itself cuts).
func (in *Ingester) cut(a *actorState, f *Frame) error {
	if a.obs != nil { // nil after an earlier cut failed
		if err := a.obs.Close(); err != nil {
			return err
		}
		a.obs = nil
	}
	var mark []int
	nc := len(in.schema.fields)
	for i, r := range f.Rows {
		if f.First[i] <= a.next[r] {
			continue
		}
		in.stats.Gaps++
		row := a.rows[r]
		c := in.cfg.Buffer.Cursor(row)
		if c == 0 {
			continue
		}
		_, nextST, ok := in.cfg.Buffer.StepTypeAt(row, c-1)
		st := tensorbuf.StepType(int32(binary.LittleEndian.Uint32(f.Cols[nc][4*i:])))
		if ok && nextST == st {
			mark = append(mark, row)
		}
	}
	if len(mark) > 0 {
		w, err := in.cfg.Buffer.NewWriter(mark...)
		if err != nil {
			return err
		}
		err = w.MarkCut(mark...)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return in.open(a)
}

// write feeds the new steps of a decoded frame to the actor's observer,
// one batched step (one Writer.Add) at a time. When the frame holds every
// row of the actor in order, the user fields of a step are the frame's
// own bytes (the scratch tensors are pointed at them, no copy); otherwise
// they are copied into the scratch tensors row by row.
func (in *Ingester) write(a *actorState, f *Frame) {
	if a.obs == nil {
		// A cut that failed after closing the observer left none: start a
		// fresh one (no item spans what came before), or count the frame's
		// steps as not observed.
		if err := in.open(a); err != nil {
			in.stats.ObserveErr++
			return
		}
	}
	nc := len(in.schema.fields)
	if p, ok := a.obs.(*plainWriter); ok {
		written, dups, failed := p.writeFrame(f, a.next, nc)
		in.stats.Steps += int64(written)
		in.stats.Duplicates += int64(dups)
		in.stats.ObserveErr += int64(failed)
		in.finishFrame(a, f, written)
		return
	}
	t := &a.traj
	r := len(f.Rows)
	all := r == len(a.rows)
	for i, row := range f.Rows {
		all = all && row == i
	}
	// whole: no step of the frame is written already.
	whole := true
	for i, row := range f.Rows {
		whole = whole && f.First[i] >= a.next[row]
	}
	if whole {
		clear(t.Active)
		for _, row := range f.Rows {
			t.Active[row] = true
		}
	}
	written := 0
	for k := range f.K {
		n := r
		if !whole {
			clear(t.Active)
			n = 0
			for i, row := range f.Rows {
				if f.First[i]+int64(k) >= a.next[row] {
					t.Active[row] = true
					n++
				}
			}
		}
		if n == 0 {
			in.stats.Duplicates += int64(r)
			continue
		}
		in.stats.Duplicates += int64(r - n)
		for c, d := range a.cols {
			sb := in.schema.colBytes[c]
			src := f.Cols[c][k*r*sb : (k+1)*r*sb]
			if all {
				d.Header.Raw = src
				continue
			}
			d.Header.Raw = a.own[c]
			for i, row := range f.Rows {
				copy(d.Header.Raw[row*sb:(row+1)*sb], src[i*sb:(i+1)*sb])
			}
		}
		o := k * r * 4
		for _, row := range f.Rows {
			t.StepType[row] = tensorbuf.StepType(int32(binary.LittleEndian.Uint32(f.Cols[nc][o:])))
			t.NextStepType[row] = tensorbuf.StepType(int32(binary.LittleEndian.Uint32(f.Cols[nc+1][o:])))
			t.Reward[row] = math.Float32frombits(binary.LittleEndian.Uint32(f.Cols[nc+2][o:]))
			t.Discount[row] = math.Float32frombits(binary.LittleEndian.Uint32(f.Cols[nc+3][o:]))
			o += 4
		}
		if err := a.obs.Observe(t); err != nil {
			in.stats.ObserveErr++
		}
		in.stats.Steps += int64(n)
		written += n
	}
	// Frame bytes are not kept past the message: point the tensors back
	// at their own memory.
	for c, d := range a.cols {
		d.Header.Raw = a.own[c]
	}
	in.finishFrame(a, f, written)
}

// finishFrame records that frame f of actor a is written.
func (in *Ingester) finishFrame(a *actorState, f *Frame, written int) {
	for i, row := range f.Rows {
		a.next[row] = max(a.next[row], f.First[i]+int64(f.K))
	}
	if written > 0 {
		in.stats.Frames++
	}
	a.fresh = false
}
