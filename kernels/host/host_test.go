//go:build cgo

package host

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
)

const guard = 64

// grids are launch shapes (gx, gy, bx): single thread, odd thread counts
// that force one-thread groups, fewer y-blocks than columns (so blocks
// stride over columns), and warp-multiple blocks that use 32-lane groups.
var grids = [][3]int64{{1, 1, 1}, {1, 1, 32}, {3, 2, 7}, {4, 1, 64}, {2, 5, 256}}

// steps are step sizes covering every word width (1, 2, 4, 8, 16 bytes)
// and word counts below and above the 32-lane group size, up to groups of
// 256 lanes with several 16-byte words each (16384, 20016).
var steps = []int64{1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 48, 100, 128, 528, 3072, 16384, 20016}

type env struct {
	t   *testing.T
	rng *rand.Rand
	be  *cpu.Backend
}

func newEnv(t *testing.T, seed uint64) *env {
	return &env{t: t, rng: rand.New(rand.NewPCG(seed, 77)), be: cpu.New()}
}

func (e *env) mem(n int) *Mem {
	m, err := Alloc(n)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Free)
	return m
}

func (e *env) random(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(e.rng.Uint32())
	}
	return b
}

// buf is a host-build output with guard bytes on both sides and a random
// misalignment, paired with the cpu reference's output arena.
type buf struct {
	m    *Mem
	off  int
	n    int
	init []byte
	ref  kernels.Arena
}

func (e *env) buf(n int) *buf {
	off := guard + e.rng.IntN(17)
	m := e.mem(off + n + guard)
	init := e.random(m.n)
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

func (b *buf) addr() uint64 { return b.m.Addr(b.off) }

// check compares the payload with the cpu reference and the guards with
// their initial bytes.
func (e *env) check(what string, b *buf) {
	e.t.Helper()
	want := make([]byte, b.n)
	if err := e.be.Download(want, b.ref, 0); err != nil {
		e.t.Fatal(err)
	}
	got := b.m.Bytes()
	if !bytes.Equal(got[b.off:b.off+b.n], want) {
		i := 0
		for i < b.n && got[b.off+i] == want[i] {
			i++
		}
		e.t.Fatalf("%s: byte %d of %d differs from the cpu reference: got %d, want %d", what, i, b.n, got[b.off+i], want[i])
	}
	if !bytes.Equal(got[:b.off], b.init[:b.off]) || !bytes.Equal(got[b.off+b.n:], b.init[b.off+b.n:]) {
		e.t.Fatalf("%s: guard bytes around the output were written", what)
	}
}

// ring is one column's ring arena in both builds, with the same contents.
type ring struct {
	step int64
	m    *Mem
	off  int
	ref  kernels.Arena
	data []byte
}

func (e *env) ring(step, steps int64) *ring {
	n := int(step * steps)
	off := 0
	if e.rng.IntN(3) == 0 {
		off = 1 + e.rng.IntN(15) // an unaligned ring forces narrow words
	}
	m := e.mem(off + n)
	data := e.random(n)
	copy(m.Bytes()[off:], data)
	ref, err := e.be.Alloc(int64(n))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.be.Upload(ref, 0, data); err != nil {
		e.t.Fatal(err)
	}
	return &ring{step: step, m: m, off: off, ref: ref, data: data}
}

func (r *ring) addr() uint64 { return r.m.Addr(r.off) }

// descs writes column descriptors into C memory.
func (e *env) descs(d []kernels.ColDesc) *Mem {
	m := e.mem(len(d) * kernels.ColDescSize)
	copy(unsafe.Slice((*kernels.ColDesc)(unsafe.Pointer(&m.Bytes()[0])), len(d)), d)
	return m
}

func (e *env) int64s(v []int64) *Mem {
	m := e.mem(8 * max(len(v), 1))
	copy(unsafe.Slice((*int64)(unsafe.Pointer(&m.Bytes()[0])), max(len(v), 1)), v)
	return m
}

func (e *env) pickStep() int64 { return steps[e.rng.IntN(len(steps))] }

func TestDescriptorLayout(t *testing.T) {
	if s := unsafe.Sizeof(kernels.ColDesc{}); s != kernels.ColDescSize {
		t.Fatalf("ColDesc is %d bytes, tr_col is %d", s, kernels.ColDescSize)
	}
	if s := unsafe.Sizeof(kernels.WinDesc{}); s != kernels.WinDescSize {
		t.Fatalf("WinDesc is %d bytes, tr_win is %d", s, kernels.WinDescSize)
	}
	if s := unsafe.Sizeof(kernels.Window{}); s != kernels.WinDescSize {
		t.Fatalf("Window is %d bytes, tr_win is %d", s, kernels.WinDescSize)
	}
}

func TestLaunchErrors(t *testing.T) {
	tests := []struct {
		name       string
		k          kernels.Kernel
		gx, gy, bx int64
		args       int
	}{
		{"unknown kernel", kernels.Kernel{Entry: "nope", Args: 1}, 1, 1, 1, 1},
		{"too few arguments", kernels.GatherRows, 1, 1, 1, 3},
		{"too many arguments", kernels.GatherWindows, 1, 1, 1, 8},
		{"empty grid", kernels.Scatter, 0, 1, 1, 4},
		{"empty block", kernels.Scatter, 1, 1, 0, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Launch(tc.k, tc.gx, tc.gy, tc.bx, make([]uint64, tc.args)...)
			if err == nil {
				t.Fatal("launch succeeded")
			}
		})
	}
}

func TestGatherRowsMatchesCPU(t *testing.T) {
	for trial := range 60 {
		e := newEnv(t, uint64(trial))
		grid := grids[trial%len(grids)]
		nsteps := int64(1 + e.rng.IntN(50))
		n := e.rng.IntN(40) // zero rows too
		ncols := 1 + e.rng.IntN(4)
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = e.rng.Int64N(nsteps) // repeats allowed: reads only
		}
		var cols []kernels.Column
		var descs []kernels.ColDesc
		var outs []*buf
		for range ncols {
			r := e.ring(e.pickStep(), nsteps)
			o := e.buf(n * int(r.step))
			outs = append(outs, o)
			cols = append(cols, kernels.Column{Ring: r.ref, StepBytes: r.step, Out: o.ref})
			descs = append(descs, kernels.ColDesc{Ring: r.addr(), Out: o.addr(), Step: r.step})
		}
		if err := e.be.GatherRows(cols, idx); err != nil {
			t.Fatal(err)
		}
		d, ix := e.descs(descs), e.int64s(idx)
		if err := Launch(kernels.GatherRows, grid[0], grid[1], grid[2], d.Addr(0), uint64(ncols), ix.Addr(0), uint64(n)); err != nil {
			t.Fatal(err)
		}
		for c, o := range outs {
			e.check("gather rows, column "+string(rune('0'+c)), o)
		}
	}
}

func TestConcatMatchesCPU(t *testing.T) {
	for trial := range 60 {
		e := newEnv(t, 1000+uint64(trial))
		grid := grids[trial%len(grids)]
		nsteps := int64(2 + e.rng.IntN(50))
		n := e.rng.IntN(40)
		ncols := 1 + e.rng.IntN(4)
		idx, next := make([]int64, n), make([]int64, n)
		for i := range idx {
			idx[i] = e.rng.Int64N(nsteps - 1)
			next[i] = idx[i] + 1
		}
		var cols []kernels.Column
		var descs []kernels.ColDesc
		var outs []*buf
		for c := range ncols {
			r := e.ring(e.pickStep(), nsteps)
			o := e.buf(n * int(r.step))
			outs = append(outs, o)
			col := kernels.Column{Ring: r.ref, StepBytes: r.step, Out: o.ref}
			desc := kernels.ColDesc{Ring: r.addr(), Out: o.addr(), Step: r.step}
			if c%2 == 0 { // every other column also gets its successors
				no := e.buf(n * int(r.step))
				outs = append(outs, no)
				col.NextOut, desc.Next = no.ref, no.addr()
			}
			cols = append(cols, col)
			descs = append(descs, desc)
		}
		if err := e.be.Concat(cols, idx, next); err != nil {
			t.Fatal(err)
		}
		d, ix, nx := e.descs(descs), e.int64s(idx), e.int64s(next)
		if err := Launch(kernels.Concat, grid[0], grid[1], grid[2], d.Addr(0), uint64(ncols), ix.Addr(0), nx.Addr(0), uint64(n)); err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			e.check("concat", o)
		}
	}
}

func TestScatterMatchesCPU(t *testing.T) {
	for trial := range 60 {
		e := newEnv(t, 2000+uint64(trial))
		grid := grids[trial%len(grids)]
		nsteps := int64(1 + e.rng.IntN(50))
		n := e.rng.IntN(int(nsteps) + 1)
		ncols := 1 + e.rng.IntN(4)
		idx := e.rng.Perm(int(nsteps))[:n] // distinct: one writer per step
		idx64 := make([]int64, n)
		for i, v := range idx {
			idx64[i] = int64(v)
		}
		var cols []kernels.Column
		var srcs [][]byte
		var descs []kernels.ColDesc
		var rings []*ring
		for range ncols {
			r := e.ring(e.pickStep(), nsteps)
			rings = append(rings, r)
			src := e.random(n * int(r.step))
			srcs = append(srcs, src)
			sm := e.mem(len(src) + 16)
			soff := e.rng.IntN(2) * (1 + e.rng.IntN(15))
			copy(sm.Bytes()[soff:], src)
			cols = append(cols, kernels.Column{Ring: r.ref, StepBytes: r.step})
			descs = append(descs, kernels.ColDesc{Ring: r.addr(), Aux: sm.Addr(soff), Step: r.step})
		}
		if err := e.be.Scatter(cols, srcs, idx64); err != nil {
			t.Fatal(err)
		}
		d, ix := e.descs(descs), e.int64s(idx64)
		if err := Launch(kernels.Scatter, grid[0], grid[1], grid[2], d.Addr(0), uint64(ncols), ix.Addr(0), uint64(n)); err != nil {
			t.Fatal(err)
		}
		for c, r := range rings {
			want := make([]byte, len(r.data))
			if err := e.be.Download(want, r.ref, 0); err != nil {
				t.Fatal(err)
			}
			if got := r.m.Bytes()[r.off:]; !bytes.Equal(got, want) {
				t.Fatalf("trial %d column %d (step %d): ring differs from the cpu reference", trial, c, r.step)
			}
		}
	}
}

// TestScatterSkipsNegative checks the marker the gpu wrapper uses for
// repeated indices: a negative index writes nothing.
func TestScatterSkipsNegative(t *testing.T) {
	e := newEnv(t, 9)
	r := e.ring(4, 4)
	want := append([]byte(nil), r.data...)
	src := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	idx := []int64{2, -1, 0}
	copy(want[8:12], src[0:4])
	copy(want[0:4], src[8:12])
	sm := e.mem(len(src))
	copy(sm.Bytes(), src)
	d := e.descs([]kernels.ColDesc{{Ring: r.addr(), Aux: sm.Addr(0), Step: 4}})
	ix := e.int64s(idx)
	for _, g := range grids {
		if err := Launch(kernels.Scatter, g[0], g[1], g[2], d.Addr(0), 1, ix.Addr(0), 3); err != nil {
			t.Fatal(err)
		}
		if got := r.m.Bytes()[r.off:]; !bytes.Equal(got, want) {
			t.Fatalf("grid %v: ring is %v, want %v", g, got, want)
		}
	}
}

func TestGatherWindowsMatchesCPU(t *testing.T) {
	for trial := range 80 {
		e := newEnv(t, 3000+uint64(trial))
		grid := grids[trial%len(grids)]
		capacity := int64(1 + e.rng.IntN(12))
		rows := int64(1 + e.rng.IntN(4))
		seqLen := int64(1 + e.rng.IntN(8))
		nwin := e.rng.IntN(12)
		ncols := 1 + e.rng.IntN(3)
		wins := make([]kernels.Window, nwin)
		descWins := make([]kernels.WinDesc, nwin)
		for i := range wins {
			w := kernels.Window{
				Row:   e.rng.Int64N(rows),
				Start: e.rng.Int64N(10 * capacity), // absolute: wraps around the ring
				Len:   e.rng.Int64N(min(seqLen, capacity) + 1),
			}
			if e.rng.IntN(4) == 0 {
				w.Len = min(seqLen, capacity) // full windows are common
			}
			wins[i] = w
			descWins[i] = kernels.WinDesc{Row: w.Row, Start: w.Start % capacity, Len: w.Len}
		}
		n := nwin * int(seqLen)
		var cols []kernels.Column
		var descs []kernels.ColDesc
		var outs []*buf
		for range ncols {
			r := e.ring(e.pickStep(), rows*capacity)
			o := e.buf(n * int(r.step))
			outs = append(outs, o)
			col := kernels.Column{Ring: r.ref, StepBytes: r.step, Out: o.ref}
			desc := kernels.ColDesc{Ring: r.addr(), Out: o.addr(), Step: r.step}
			if e.rng.IntN(2) == 0 {
				col.Pad = e.random(int(r.step))
				pm := e.mem(len(col.Pad) + 16)
				poff := e.rng.IntN(2) * 8
				copy(pm.Bytes()[poff:], col.Pad)
				desc.Aux = pm.Addr(poff)
			}
			cols = append(cols, col)
			descs = append(descs, desc)
		}
		var mask *buf
		var maskAddr uint64
		var maskRef kernels.Arena
		if trial%3 != 0 {
			mask = e.buf(n)
			outs = append(outs, mask)
			maskAddr, maskRef = mask.addr(), mask.ref
		}
		if err := e.be.GatherWindows(cols, wins, seqLen, capacity, maskRef, 0); err != nil {
			t.Fatal(err)
		}
		d := e.descs(descs)
		wm := e.mem(max(nwin, 1) * kernels.WinDescSize)
		copy(unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&wm.Bytes()[0])), nwin), descWins)
		if err := Launch(kernels.GatherWindows, grid[0], grid[1], grid[2],
			d.Addr(0), uint64(ncols), wm.Addr(0), uint64(nwin), uint64(seqLen), uint64(capacity), maskAddr); err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			e.check("gather windows", o)
		}
	}
}

// TestGatherWindowsExact pins the pad pattern, the mask bytes and the
// wrap-around of one window on a 1-byte column.
func TestGatherWindowsExact(t *testing.T) {
	e := newEnv(t, 1)
	// two rows of capacity 4: row 0 holds 10 11 12 13, row 1 holds 20 21 22 23
	rm := e.mem(8)
	copy(rm.Bytes(), []byte{10, 11, 12, 13, 20, 21, 22, 23})
	out := e.mem(12)
	mask := e.mem(12)
	pad := e.mem(1)
	pad.Bytes()[0] = 99
	wins := []kernels.WinDesc{
		{Row: 1, Start: 6 % 4, Len: 4}, // steps 6..9 of row 1: slots 2 3 0 1
		{Row: 0, Start: 3, Len: 1},     // slot 3, then pads
		{Row: 0, Start: 0, Len: 0},     // all pad
	}
	wm := e.mem(len(wins) * kernels.WinDescSize)
	copy(unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&wm.Bytes()[0])), len(wins)), wins)
	d := e.descs([]kernels.ColDesc{{Ring: rm.Addr(0), Out: out.Addr(0), Aux: pad.Addr(0), Step: 1}})
	if err := Launch(kernels.GatherWindows, 1, 1, 3, d.Addr(0), 1, wm.Addr(0), 3, 4, 4, mask.Addr(0)); err != nil {
		t.Fatal(err)
	}
	wantOut := []byte{22, 23, 20, 21, 13, 99, 99, 99, 99, 99, 99, 99}
	wantMask := []byte{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}
	if got := out.Bytes(); !bytes.Equal(got, wantOut) {
		t.Errorf("out = %v, want %v", got, wantOut)
	}
	if got := mask.Bytes(); !bytes.Equal(got, wantMask) {
		t.Errorf("mask = %v, want %v", got, wantMask)
	}
}
