//go:build cgo

package host

import (
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// checkBuf is buf at an 8-byte aligned offset (the check's windows and
// weights are 8-byte words), with the region [at, at+len(in)) of both
// builds' memory set to in.
func (e *env) checkBuf(n int, at int64, in []byte) *buf {
	off := guard + 8*e.rng.IntN(3)
	m := e.mem(off + n + guard)
	init := e.random(m.n)
	copy(init[off+int(at):], in)
	copy(m.Bytes(), init)
	ref, err := e.be.Alloc(int64(n))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.be.Upload(ref, 0, init[off:off+n]); err != nil {
		e.t.Fatal(err)
	}
	return &buf{m: m, off: off, n: n, init: init, ref: ref}
}

// metaByte returns a random metadata byte: step and next step types in
// 0..2, discount zero and cut bits set now and then.
func (e *env) metaByte() byte {
	m := byte(e.rng.IntN(3)) | byte(e.rng.IntN(3))<<2
	if e.rng.IntN(3) == 0 {
		m |= 1 << 4
	}
	if e.rng.IntN(6) == 0 {
		m |= 1 << 5
	}
	return m
}

// TestNStepCheckMatchesCPU runs the host build of trajring_nstep_check
// against cpu.Backend.NStepCheck on random metadata, cursors and windows
// (wrapping rows, short rows, every horizon up to past the capacity),
// every launch shape, and checks that nothing outside the outputs moved.
func TestNStepCheckMatchesCPU(t *testing.T) {
	for trial := range 150 {
		e := newEnv(t, 9100+uint64(trial))
		grid := grids[trial%len(grids)]
		rows := int64(1 + e.rng.IntN(4))
		capacity := int64(1 + e.rng.IntN(24))
		n := int64(e.rng.IntN(70))
		horizon := int64(1 + e.rng.IntN(int(capacity)+2))
		gamma := gammas[trial%len(gammas)]
		meta := make([]byte, rows*capacity)
		for i := range meta {
			meta[i] = e.metaByte()
		}
		cursors := make([]int64, rows)
		for r := range cursors {
			cursors[r] = 1 + e.rng.Int64N(4*capacity)
		}
		wins := make([]kernels.WinDesc, n)
		weights := make([]float64, n)
		for i := range wins {
			r := e.rng.Int64N(rows)
			wins[i] = kernels.WinDesc{Row: r, Start: e.rng.Int64N(min(cursors[r], capacity)), Len: 1 + e.rng.Int64N(capacity)}
			weights[i] = e.rng.Float64()
			if i%7 == 3 {
				weights[i] = math.Float64frombits(e.rng.Uint64() &^ (1 << 63) % math.Float64bits(1)) // any value in [0, 1]
			}
		}
		// Selection layout: windows, weights, n-step, current and next
		// windows, validity bytes, masked weights.
		winOff, weightOff := int64(0), 24*n
		stepsOff := weightOff + 8*n
		curOff, nextOff := stepsOff+24*n, stepsOff+48*n
		validOff := nextOff + 24*n
		maskedOff := (validOff + n + 3) &^ 3
		selSize := maskedOff + 4*n
		in := make([]byte, stepsOff)
		copy(in, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(wins))), 24*n))
		copy(in[weightOff:], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(weights))), 8*n))
		sel := e.checkBuf(int(selSize), winOff, in)
		discOff := 4 * int64(e.rng.IntN(3))
		doneOff := discOff + 4*n + int64(e.rng.IntN(5))
		out := e.checkBuf(int(doneOff+n), 0, nil)
		metaM := e.checkBuf(len(meta), 0, meta)
		cb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(cursors))), 8*rows)
		curM := e.checkBuf(len(cb), 0, cb)

		c := kernels.TransitionCheck{
			Meta: metaM.ref, Cursors: curM.ref, Rows: rows, Capacity: capacity, Horizon: horizon, Gamma: gamma, N: n,
			Sel: sel.ref, WinOff: winOff, WeightOff: weightOff, StepsOff: stepsOff, CurOff: curOff, NextOff: nextOff,
			ValidOff: validOff, MaskedOff: maskedOff, Out: out.ref, DiscOff: discOff, DoneOff: doneOff,
		}
		if err := e.be.NStepCheck(c); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		s := sel.addr()
		if err := Launch(kernels.NStepCheck, grid[0], grid[1], grid[2],
			metaM.addr(), curM.addr(), uint64(capacity), uint64(horizon), math.Float64bits(gamma), uint64(n),
			s+uint64(winOff), s+uint64(weightOff), s+uint64(stepsOff), s+uint64(curOff), s+uint64(nextOff),
			s+uint64(validOff), s+uint64(maskedOff), out.addr()+uint64(discOff), out.addr()+uint64(doneOff)); err != nil {
			t.Fatal(err)
		}
		e.check("selection outputs", sel)
		e.check("discounts and dones", out)
		e.check("metadata (input)", metaM)
		e.check("cursors (input)", curM)
	}
}
