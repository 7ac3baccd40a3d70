//go:build cgo

package host

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// record is a ring arena of packed records shared by several columns, in
// both builds with the same contents, with guard bytes after it (and a
// random misalignment before it) in the host build.
type record struct {
	stride int64
	steps  []int64 // StepBytes per column
	offs   []int64 // Offset per column
	m      *Mem
	off    int
	size   int
	init   []byte
	ref    kernels.Arena
}

// recordSteps are the column sizes of packed records: built-in 4-byte
// columns, small observations, odd sizes.
var recordSteps = []int64{1, 2, 3, 4, 4, 4, 8, 12, 16, 20, 88, 100}

// record lays out 1-5 random columns at increasing offsets with random
// gaps, in a stride with random tail padding (sometimes none), over
// nsteps steps.
func (e *env) record(nsteps int64) *record {
	r := &record{}
	ncols := 1 + e.rng.IntN(5)
	var off int64
	for range ncols {
		s := recordSteps[e.rng.IntN(len(recordSteps))]
		if e.rng.IntN(2) == 0 {
			off += int64(e.rng.IntN(8)) // a gap before the column
		}
		r.steps, r.offs = append(r.steps, s), append(r.offs, off)
		off += s
	}
	r.stride = off
	if e.rng.IntN(3) != 0 {
		r.stride += int64(e.rng.IntN(17))
	}
	if e.rng.IntN(2) == 0 {
		r.stride = (r.stride + 15) / 16 * 16 // the aligned records of tensorbuf
	}
	r.size = int(r.stride * nsteps)
	if e.rng.IntN(3) == 0 {
		r.off = 1 + e.rng.IntN(15)
	}
	r.m = e.mem(r.off + r.size + guard)
	r.init = e.random(r.m.n)
	copy(r.m.Bytes(), r.init)
	ref, err := e.be.Alloc(int64(r.size))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.be.Upload(ref, 0, r.init[r.off:r.off+r.size]); err != nil {
		e.t.Fatal(err)
	}
	r.ref = ref
	return r
}

// col returns column c of the record as a Column (no outputs) and as a
// descriptor (Ring with the offset applied, Stride).
func (r *record) col(c int) (kernels.Column, kernels.ColDesc) {
	return kernels.Column{Ring: r.ref, StepBytes: r.steps[c], Stride: r.stride, Offset: r.offs[c]},
		kernels.ColDesc{Ring: r.m.Addr(r.off) + uint64(r.offs[c]), Step: r.steps[c], Stride: r.stride}
}

// checkRing compares the host-build ring with the cpu reference's, and
// the guard bytes around it with their initial bytes.
func (e *env) checkRing(what string, r *record) {
	e.t.Helper()
	want := make([]byte, r.size)
	if err := e.be.Download(want, r.ref, 0); err != nil {
		e.t.Fatal(err)
	}
	got := r.m.Bytes()
	if !bytes.Equal(got[r.off:r.off+r.size], want) {
		e.t.Fatalf("%s: ring differs from the cpu reference", what)
	}
	if !bytes.Equal(got[:r.off], r.init[:r.off]) || !bytes.Equal(got[r.off+r.size:], r.init[r.off+r.size:]) {
		e.t.Fatalf("%s: guard bytes around the ring were written", what)
	}
}

// TestStridedMatchesCPU runs every column kernel on columns of packed
// records (random strides, offsets and gaps, unaligned rings, guard
// bytes) in the host build and in the cpu reference, over every grid,
// and requires the same bytes: outputs, rings after a scatter (the gaps
// and the other columns' bytes untouched), and nothing outside them.
func TestStridedMatchesCPU(t *testing.T) {
	for trial := range 80 {
		e := newEnv(t, 5000+uint64(trial))
		grid := grids[trial%len(grids)]
		capacity := int64(1 + e.rng.IntN(10))
		rows := int64(1 + e.rng.IntN(4))
		nsteps := rows * capacity
		r := e.record(nsteps)
		what := fmt.Sprintf("trial %d (stride %d, steps %v at %v, grid %v)", trial, r.stride, r.steps, r.offs, grid)

		// GatherRows and Concat.
		n := e.rng.IntN(30)
		idx, next := make([]int64, n), make([]int64, n)
		for i := range idx {
			idx[i], next[i] = e.rng.Int64N(nsteps), e.rng.Int64N(nsteps)
		}
		var cols []kernels.Column
		var descs []kernels.ColDesc
		var outs []*buf
		for c := range r.steps {
			col, d := r.col(c)
			o, no := e.buf(n*int(col.StepBytes)), e.buf(n*int(col.StepBytes))
			outs = append(outs, o, no)
			col.Out, col.NextOut, d.Out, d.Next = o.ref, no.ref, o.addr(), no.addr()
			cols, descs = append(cols, col), append(descs, d)
		}
		if err := e.be.Concat(cols, idx, next); err != nil {
			t.Fatal(err)
		}
		dm, ix, nx := e.descs(descs), e.int64s(idx), e.int64s(next)
		if err := Launch(kernels.Concat, grid[0], grid[1], grid[2], dm.Addr(0), uint64(len(cols)), ix.Addr(0), nx.Addr(0), uint64(n)); err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			e.check("concat "+what, o)
		}
		outs = outs[:0]
		for c := range cols {
			o := e.buf(n * int(cols[c].StepBytes))
			outs = append(outs, o)
			cols[c].Out, cols[c].NextOut, descs[c].Out, descs[c].Next = o.ref, nil, o.addr(), 0
		}
		if err := e.be.GatherRows(cols, idx); err != nil {
			t.Fatal(err)
		}
		dm = e.descs(descs)
		if err := Launch(kernels.GatherRows, grid[0], grid[1], grid[2], dm.Addr(0), uint64(len(cols)), ix.Addr(0), uint64(n)); err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			e.check("gather rows "+what, o)
		}

		// GatherWindows, with padding and mask.
		seqLen := int64(1 + e.rng.IntN(5))
		nwin := e.rng.IntN(8)
		wins := make([]kernels.Window, nwin)
		wd := make([]kernels.WinDesc, nwin)
		for i := range wins {
			w := kernels.Window{Row: e.rng.Int64N(rows), Start: e.rng.Int64N(5 * capacity), Len: e.rng.Int64N(min(seqLen, capacity) + 1)}
			wins[i], wd[i] = w, kernels.WinDesc{Row: w.Row, Start: w.Start % capacity, Len: w.Len}
		}
		nout := nwin * int(seqLen)
		outs = outs[:0]
		for c := range cols {
			o := e.buf(nout * int(cols[c].StepBytes))
			outs = append(outs, o)
			cols[c].Out, descs[c].Out, cols[c].Pad, descs[c].Aux = o.ref, o.addr(), nil, 0
			if e.rng.IntN(2) == 0 {
				cols[c].Pad = e.random(int(cols[c].StepBytes))
				pm := e.mem(len(cols[c].Pad))
				copy(pm.Bytes(), cols[c].Pad)
				descs[c].Aux = pm.Addr(0)
			}
		}
		mask := e.buf(nout)
		outs = append(outs, mask)
		if err := e.be.GatherWindows(cols, wins, seqLen, capacity, mask.ref, 0); err != nil {
			t.Fatal(err)
		}
		dm = e.descs(descs)
		wm := e.mem(max(nwin, 1) * kernels.WinDescSize)
		copy(unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&wm.Bytes()[0])), nwin), wd)
		if err := Launch(kernels.GatherWindows, grid[0], grid[1], grid[2],
			dm.Addr(0), uint64(len(cols)), wm.Addr(0), uint64(nwin), uint64(seqLen), uint64(capacity), mask.addr()); err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			e.check(fmt.Sprintf("gather windows out %d seq %d wins %v ", i, seqLen, wins)+what, o)
		}

		// Scatter into the shared ring: distinct steps, every column.
		ns := e.rng.IntN(int(nsteps) + 1)
		perm := e.rng.Perm(int(nsteps))[:ns]
		sidx := make([]int64, ns)
		for i, v := range perm {
			sidx[i] = int64(v)
		}
		var srcs [][]byte
		for c := range cols {
			src := e.random(ns * int(cols[c].StepBytes))
			srcs = append(srcs, src)
			sm := e.mem(len(src) + 1)
			copy(sm.Bytes(), src)
			cols[c].Out, cols[c].Pad = nil, nil
			descs[c].Out, descs[c].Aux = 0, sm.Addr(0)
		}
		if err := e.be.Scatter(cols, srcs, sidx); err != nil {
			t.Fatal(err)
		}
		dm, ix = e.descs(descs), e.int64s(sidx)
		if err := Launch(kernels.Scatter, grid[0], grid[1], grid[2], dm.Addr(0), uint64(len(cols)), ix.Addr(0), uint64(ns)); err != nil {
			t.Fatal(err)
		}
		e.checkRing("scatter "+what, r)
	}
}

// TestStridedNStepRewardMatchesCPU sums rewards stored as one float32
// column of packed records, host build against the cpu reference.
func TestStridedNStepRewardMatchesCPU(t *testing.T) {
	for trial := range 40 {
		e := newEnv(t, 6000+uint64(trial))
		grid := grids[trial%len(grids)]
		capacity := int64(1 + e.rng.IntN(10))
		rows := int64(1 + e.rng.IntN(3))
		stride := 4 * int64(1+e.rng.IntN(8))
		off := 4 * e.rng.Int64N(stride/4)
		size := int(stride * rows * capacity)
		data := e.random(size)
		for i := off; i < int64(size); i += stride { // finite rewards
			*(*float32)(unsafe.Pointer(&data[i])) = float32(e.rng.NormFloat64())
		}
		ring := e.mem(size)
		copy(ring.Bytes(), data)
		ref, err := e.be.Alloc(int64(size))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.be.Upload(ref, 0, data); err != nil {
			t.Fatal(err)
		}
		n := 1 + e.rng.IntN(10)
		wins := make([]kernels.Window, n)
		wd := make([]kernels.WinDesc, n)
		for i := range wins {
			w := kernels.Window{Row: e.rng.Int64N(rows), Start: e.rng.Int64N(4 * capacity), Len: e.rng.Int64N(capacity + 1)}
			wins[i], wd[i] = w, kernels.WinDesc{Row: w.Row, Start: w.Start, Len: w.Len}
		}
		gamma := e.rng.Float64()
		o := e.buf(4 * n)
		col := kernels.Column{Ring: ref, StepBytes: 4, Stride: stride, Offset: off}
		if err := e.be.NStepRewardColumn(col, o.ref, 0, wins, capacity, gamma); err != nil {
			t.Fatal(err)
		}
		wm := e.mem(n * kernels.WinDescSize)
		copy(unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&wm.Bytes()[0])), n), wd)
		if err := Launch(kernels.NStepReward, grid[0], grid[1], grid[2], ring.Addr(int(off)), o.addr(), wm.Addr(0),
			uint64(n), uint64(capacity), math.Float64bits(gamma), uint64(stride)); err != nil {
			t.Fatal(err)
		}
		e.check(fmt.Sprintf("n-step trial %d (stride %d, offset %d)", trial, stride, off), o)
	}
}

// TestStridedColumnRejected: the cpu reference refuses a column that does
// not fit in its stride, and a stride that is not whole steps for the
// n-step sums, writing nothing.
func TestStridedColumnRejected(t *testing.T) {
	e := newEnv(t, 1)
	ring, err := e.be.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.be.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []kernels.Column{
		{Ring: ring, StepBytes: 8, Stride: 16, Offset: 9},  // past the record
		{Ring: ring, StepBytes: 8, Stride: 4},              // stride below the step
		{Ring: ring, StepBytes: 4, Stride: 16, Offset: -4}, // negative offset
	} {
		col.Out = out
		if err := e.be.GatherRows([]kernels.Column{col}, []int64{0}); err == nil {
			t.Errorf("GatherRows accepted %+v", col)
		}
		if err := e.be.Scatter([]kernels.Column{col}, [][]byte{make([]byte, col.StepBytes)}, []int64{0}); err == nil {
			t.Errorf("Scatter accepted %+v", col)
		}
	}
	// Step 3 of a 16-byte stride ends at byte 64: in; step 4 is out.
	col := kernels.Column{Ring: ring, StepBytes: 4, Stride: 16, Offset: 12, Out: out}
	if err := e.be.GatherRows([]kernels.Column{col}, []int64{3}); err != nil {
		t.Errorf("GatherRows of the last step: %v", err)
	}
	if err := e.be.GatherRows([]kernels.Column{col}, []int64{4}); err == nil {
		t.Error("GatherRows accepted step 4 of a 4-step ring")
	}
	if err := e.be.NStepRewardColumn(kernels.Column{Ring: ring, StepBytes: 4, Stride: 6}, out, 0, nil, 1, 0.5); err == nil {
		t.Error("NStepRewardColumn accepted a stride of 6 bytes")
	}
}
