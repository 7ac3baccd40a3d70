package cpu

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// TestNStepCheckExact pins the n-step lengths, windows, discounts and
// IsDone values of hand-built rows: a termination, a boundary step, a
// cut, a truncation, single-step items, and a wrapped row whose cursor
// bounds the look-ahead.
func TestNStepCheckExact(t *testing.T) {
	const capacity = 8
	meta := []byte{
		// Row 0, cursor 8: F>M, M>M, M>L discount 0, L>F, F>M, M>M cut, F>L, L>F.
		0x04, 0x05, 0x19, 0x02, 0x04, 0x25, 0x08, 0x02,
		// Row 1, cursor 11 (steps 3..10 stored; slots 0..2 hold 8..10): M>M throughout.
		0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	}
	cursors := []int64{8, 11}
	tests := []struct {
		name       string
		win        kernels.WinDesc
		weight     float64
		k, nextPos int64
		disc       float32
		done       byte
		masked     float32
	}{
		{"terminates at the third step", kernels.WinDesc{Row: 0, Start: 0, Len: 4}, 0.5, 3, 3, 0, 1, 0.5},
		{"item length bounds k", kernels.WinDesc{Row: 0, Start: 1, Len: 2}, 1, 1, 2, 0.5, 0, 1},
		{"boundary step", kernels.WinDesc{Row: 0, Start: 3, Len: 3}, 1, 0, 3, 0, 0, 0},
		{"cut after the first step", kernels.WinDesc{Row: 0, Start: 4, Len: 4}, 0.25, 1, 5, 0.5, 0, 0.25},
		{"starts at a cut", kernels.WinDesc{Row: 0, Start: 5, Len: 3}, 1, 0, 5, 0, 0, 0},
		{"truncation", kernels.WinDesc{Row: 0, Start: 6, Len: 2}, 1.0 / 3, 1, 7, 0.5, 2, float32(1.0 / 3)},
		{"single step", kernels.WinDesc{Row: 0, Start: 4, Len: 1}, 1, 0, 4, 0, 0, 0},
		{"wraps the ring", kernels.WinDesc{Row: 1, Start: 6, Len: 5}, 1, 3, 1, 0.125, 0, 1},
		{"cursor bounds k", kernels.WinDesc{Row: 1, Start: 0, Len: 8}, 1, 2, 2, 0.25, 0, 1},
		{"newest step", kernels.WinDesc{Row: 1, Start: 2, Len: 1}, 1, 0, 2, 0, 0, 0},
	}
	n := int64(len(tests))
	b := New()
	metaA := byteArena(t, b, meta)
	curA := byteArena(t, b, unsafe.Slice((*byte)(unsafe.Pointer(&cursors[0])), 16))
	winOff, weightOff := int64(0), 24*n
	stepsOff, curOff, nextOff := 32*n, 56*n, 80*n
	validOff, maskedOff := 104*n, 108*n
	sel := byteArena(t, b, make([]byte, 112*n))
	out := byteArena(t, b, make([]byte, 5*n))
	sb := sel.(*Arena).b
	wins := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[winOff])), n)
	weights := unsafe.Slice((*float64)(unsafe.Pointer(&sb[weightOff])), n)
	for i, tc := range tests {
		wins[i], weights[i] = tc.win, tc.weight
	}
	c := kernels.TransitionCheck{
		Meta: metaA, Cursors: curA, Rows: 2, Capacity: capacity, Horizon: 3, Gamma: 0.5, N: n,
		Sel: sel, WinOff: winOff, WeightOff: weightOff, StepsOff: stepsOff, CurOff: curOff, NextOff: nextOff,
		ValidOff: validOff, MaskedOff: maskedOff, Out: out, DiscOff: 0, DoneOff: 4 * n,
	}
	if err := b.NStepCheck(c); err != nil {
		t.Fatal(err)
	}
	ob := out.(*Arena).b
	steps := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[stepsOff])), n)
	cur := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[curOff])), n)
	next := unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&sb[nextOff])), n)
	masked := unsafe.Slice((*float32)(unsafe.Pointer(&sb[maskedOff])), n)
	disc := unsafe.Slice((*float32)(unsafe.Pointer(&ob[0])), n)
	for i, tc := range tests {
		w := tc.win
		if want := (kernels.WinDesc{Row: w.Row, Start: w.Start, Len: tc.k}); steps[i] != want {
			t.Errorf("%s: n-step window %+v, want %+v", tc.name, steps[i], want)
		}
		if want := (kernels.WinDesc{Row: w.Row, Start: w.Start, Len: 1}); cur[i] != want {
			t.Errorf("%s: current window %+v, want %+v", tc.name, cur[i], want)
		}
		if want := (kernels.WinDesc{Row: w.Row, Start: tc.nextPos, Len: 1}); next[i] != want {
			t.Errorf("%s: next window %+v, want %+v", tc.name, next[i], want)
		}
		if valid := sb[validOff+int64(i)]; valid != b2u8(tc.k > 0) {
			t.Errorf("%s: valid %d", tc.name, valid)
		}
		if disc[i] != tc.disc || ob[4*n+int64(i)] != tc.done || masked[i] != tc.masked {
			t.Errorf("%s: discount %v, done %d, masked weight %v; want %v, %d, %v", tc.name, disc[i], ob[4*n+int64(i)], masked[i], tc.disc, tc.done, tc.masked)
		}
	}

	// A window outside the rows fails with ErrBounds and writes nothing.
	wins[3].Row = 2
	before := bytes.Clone(sb)
	if err := b.NStepCheck(c); !errors.Is(err, ErrBounds) {
		t.Fatalf("window of row 2: %v, want ErrBounds", err)
	}
	if !bytes.Equal(sb, before) {
		t.Fatal("a failed check wrote its outputs")
	}
	wins[3].Row = 0
	bad := []kernels.TransitionCheck{c, c, c, c, c}
	bad[0].Horizon = 0
	bad[1].Gamma = 1.5
	bad[2].StepsOff = 4
	bad[3].N = n + 1
	bad[4].Rows = 3
	for i, bc := range bad {
		if err := b.NStepCheck(bc); !errors.Is(err, ErrBounds) {
			t.Errorf("bad check %d: %v, want ErrBounds", i, err)
		}
	}
}

func byteArena(t *testing.T, b *Backend, v []byte) kernels.Arena {
	t.Helper()
	a, err := b.Alloc(int64(len(v)))
	if err != nil {
		t.Fatal(err)
	}
	copy(a.(*Arena).b, v)
	return a
}

func b2u8(v bool) byte {
	if v {
		return 1
	}
	return 0
}
