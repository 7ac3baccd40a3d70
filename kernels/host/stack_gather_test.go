//go:build cgo

package host

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// TestStackGatherMatchesCPU runs the host build of trajring_stack_gather
// against cpu.Backend.StackGather on random metadata (episode starts,
// cuts), cursors (short rows, wrapped rows), windows, every K up to the
// capacity, plain rings of every word width and packed records, with
// and without the next stacks and the validity marks, every launch
// shape, and checks that nothing outside the outputs moved.
func TestStackGatherMatchesCPU(t *testing.T) {
	for trial := range 150 {
		e := newEnv(t, 9700+uint64(trial))
		grid := grids[trial%len(grids)]
		rows := int64(1 + e.rng.IntN(4))
		capacity := int64(1 + e.rng.IntN(20))
		k := 1 + e.rng.Int64N(capacity)
		n := int64(e.rng.IntN(40))
		meta := make([]byte, rows*capacity)
		for i := range meta {
			meta[i] = e.metaByte()
		}
		cursors := make([]int64, rows)
		for r := range cursors {
			cursors[r] = 1 + e.rng.Int64N(4*capacity)
		}
		cur, next := make([]kernels.WinDesc, n), make([]kernels.WinDesc, n)
		for i := range cur {
			r := e.rng.Int64N(rows)
			cur[i] = kernels.WinDesc{Row: r, Start: e.rng.Int64N(min(cursors[r], capacity)), Len: 1}
			next[i] = kernels.WinDesc{Row: r, Start: e.rng.Int64N(min(cursors[r], capacity)), Len: 1}
		}
		var col kernels.Column
		var ringAddr uint64
		var checkRing func()
		if e.rng.IntN(2) == 0 {
			rg := e.ring(e.pickStep(), rows*capacity)
			col, ringAddr = kernels.Column{Ring: rg.ref, StepBytes: rg.step}, rg.addr()
			checkRing = func() {}
		} else {
			rec := e.record(rows * capacity)
			c := e.rng.IntN(len(rec.steps))
			var d kernels.ColDesc
			col, d = rec.col(c)
			ringAddr = d.Ring
			checkRing = func() { e.checkRing("ring (input)", rec) }
		}
		s := col.StepBytes
		if n*k*s > 1<<17 { // keep large frames to a few transitions: the test stays quick under -race
			n = max(1, (1<<17)/(k*s))
			cur, next = cur[:n], next[:n]
		}
		out := e.buf(int(n * k * s))
		withNext, mark := e.rng.IntN(3) != 0, e.rng.IntN(3) != 0
		nout := e.buf(int(n * k * s))
		// Selection layout: current windows, next windows, validity
		// bytes, masked weights.
		curOff, nextOff := int64(0), 24*n
		validOff := nextOff + 24*n
		maskedOff := (validOff + n + 3) &^ 3
		in := make([]byte, validOff)
		copy(in, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(cur))), 24*n))
		copy(in[nextOff:], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(next))), 24*n))
		sel := e.checkBuf(int(maskedOff+4*n), 0, in)
		metaM := e.checkBuf(len(meta), 0, meta)
		cb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(cursors))), 8*rows)
		curM := e.checkBuf(len(cb), 0, cb)

		col.Out = out.ref
		g := kernels.FrameStackGather{
			Col: col, K: k, N: n, Rows: rows, Capacity: capacity,
			Sel: sel.ref, CurOff: curOff, NextOff: nextOff, ValidOff: validOff, MaskedOff: maskedOff, Mark: mark,
			Meta: metaM.ref, Cursors: curM.ref,
		}
		var noutAddr, valid, masked uint64
		if withNext {
			g.NextOut, noutAddr = nout.ref, nout.addr()
		}
		sa := sel.addr()
		if mark {
			valid, masked = sa+uint64(validOff), sa+uint64(maskedOff)
		}
		what := fmt.Sprintf("trial %d (rows %d, capacity %d, K %d, n %d, step %d, next %v, mark %v, grid %v)", trial, rows, capacity, k, n, s, withNext, mark, grid)
		if err := e.be.StackGather(g); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := Launch(kernels.StackGather, grid[0], 2, grid[2],
			ringAddr, uint64(col.RingStride()), uint64(s), out.addr(), noutAddr, sa+uint64(curOff), sa+uint64(nextOff),
			uint64(n), uint64(k), uint64(capacity), metaM.addr(), curM.addr(), valid, masked); err != nil {
			t.Fatal(err)
		}
		e.check(what+": stacked frames", out)
		e.check(what+": next stacked frames", nout)
		e.check(what+": selection (validity marks)", sel)
		e.check(what+": metadata (input)", metaM)
		e.check(what+": cursors (input)", curM)
		checkRing()
	}
}
