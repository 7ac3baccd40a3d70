package cpu_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
)

func arena(t testing.TB, be *cpu.Backend, n int64) *cpu.Arena {
	t.Helper()
	a, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Free(a) })
	return a.(*cpu.Arena)
}

// ring returns a ring of steps steps of s bytes where byte j of step i is
// byte(i*7 + j).
func ring(t testing.TB, be *cpu.Backend, steps, s int64) *cpu.Arena {
	a := arena(t, be, steps*s)
	b := a.Bytes()
	for i := range steps {
		for j := range s {
			b[i*s+j] = byte(i*7 + j)
		}
	}
	return a
}

func step(i, s int64) []byte {
	out := make([]byte, s)
	for j := range s {
		out[j] = byte(i*7 + j)
	}
	return out
}

func TestExactMovements(t *testing.T) {
	be := cpu.New()
	const s = 3
	r := ring(t, be, 8, s) // 2 rows x capacity 4
	out := arena(t, be, 64)
	next := arena(t, be, 64)
	mask := arena(t, be, 16)

	if err := be.GatherRows([]kernels.Column{{Ring: r, StepBytes: s, Out: out, OutOff: 2}}, []int64{5, 0, 7}); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{0, 0}, step(5, s)...), step(0, s)...), step(7, s)...)
	if got := out.Bytes()[:len(want)]; !bytes.Equal(got, want) {
		t.Fatalf("gather rows %v, want %v", got, want)
	}

	clear(out.Bytes())
	if err := be.Concat([]kernels.Column{{Ring: r, StepBytes: s, Out: out, NextOut: next, NextOff: s}}, []int64{1, 6}, []int64{2, 7}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.Bytes()[:2*s], append(step(1, s), step(6, s)...); !bytes.Equal(got, want) {
		t.Fatalf("concat %v, want %v", got, want)
	}
	if got, want := next.Bytes()[:3*s], append(append(make([]byte, s), step(2, s)...), step(7, s)...); !bytes.Equal(got, want) {
		t.Fatalf("concat successors %v, want %v", got, want)
	}

	// Window of row 1 from absolute step 6 (slot 2) wraps: slots 2, 3, 0,
	// then one pad step.
	clear(out.Bytes())
	pad := []byte{9, 9, 9}
	wins := []kernels.Window{{Row: 1, Start: 6, Len: 3}, {Row: 0, Start: 1, Len: 1}}
	if err := be.GatherWindows([]kernels.Column{{Ring: r, StepBytes: s, Out: out, Pad: pad}}, wins, 4, 4, mask, 1); err != nil {
		t.Fatal(err)
	}
	want = bytes.Join([][]byte{step(6, s), step(7, s), step(4, s), pad, step(1, s), pad, pad, pad}, nil)
	if got := out.Bytes()[:len(want)]; !bytes.Equal(got, want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
	if got, want := mask.Bytes()[:9], []byte{0, 1, 1, 1, 0, 1, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Fatalf("mask %v, want %v", got, want)
	}

	// Scatter two steps into slots 3 and 4.
	src := [][]byte{{1, 2, 3, 4, 5, 6}}
	if err := be.Scatter([]kernels.Column{{Ring: r, StepBytes: s}}, src, []int64{3, 4}); err != nil {
		t.Fatal(err)
	}
	if got := r.Bytes()[3*s : 5*s]; !bytes.Equal(got, src[0]) {
		t.Fatalf("scatter %v", got)
	}
}

func TestBadArgumentsWriteNothing(t *testing.T) {
	be := cpu.New()
	r := ring(t, be, 8, 2)
	out := arena(t, be, 8)
	other := &cpu.Arena{}
	before := append([]byte(nil), r.Bytes()...)
	col := kernels.Column{Ring: r, StepBytes: 2, Out: out}
	for name, err := range map[string]error{
		"gather index":    be.GatherRows([]kernels.Column{col}, []int64{1, 8}),
		"gather negative": be.GatherRows([]kernels.Column{col}, []int64{-1}),
		"gather too many": be.GatherRows([]kernels.Column{col}, []int64{1, 2, 3, 4, 5}),
		"scatter size":    be.Scatter([]kernels.Column{col}, [][]byte{{1, 2, 3}}, []int64{1, 2}),
		"scatter index":   be.Scatter([]kernels.Column{col}, [][]byte{{1, 2, 3, 4}}, []int64{1, 9}),
		"scatter sources": be.Scatter([]kernels.Column{col}, nil, []int64{1}),
		"concat lengths":  be.Concat([]kernels.Column{col}, []int64{1}, nil),
		"window row":      be.GatherWindows([]kernels.Column{col}, []kernels.Window{{Row: 2, Len: 1}}, 1, 4, nil, 0),
		"window length":   be.GatherWindows([]kernels.Column{col}, []kernels.Window{{Len: 2}}, 1, 4, nil, 0),
		"window pad":      be.GatherWindows([]kernels.Column{{Ring: r, StepBytes: 2, Out: out, Pad: []byte{1}}}, []kernels.Window{{Len: 1}}, 1, 4, nil, 0),
		"window mask":     be.GatherWindows([]kernels.Column{col}, []kernels.Window{{Len: 1}}, 2, 4, out, 7),
		"upload":          be.Upload(out, 7, []byte{1, 2}),
		"download":        be.Download(make([]byte, 9), out, 0),
		"foreign arena":   be.GatherRows([]kernels.Column{{Ring: other, StepBytes: 2, Out: out}}, []int64{0}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, cpu.ErrBounds) && !errors.Is(err, cpu.ErrArena) {
			t.Errorf("%s: %v is not ErrBounds or ErrArena", name, err)
		}
	}
	if !bytes.Equal(r.Bytes(), before) || !bytes.Equal(out.Bytes(), make([]byte, 8)) {
		t.Fatal("a rejected call wrote memory")
	}
	a, _ := be.Alloc(4)
	if err := be.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := be.Free(a); !errors.Is(err, cpu.ErrArena) {
		t.Fatalf("double free: %v", err)
	}
}

// TestParallelSplitMatchesSerial makes movements large enough to be split
// over goroutines and compares them with small (serial) calls doing the
// same work piece by piece.
func TestParallelSplitMatchesSerial(t *testing.T) {
	be := cpu.New()
	const s, steps, n = 4096, 4096, 2048 // 8 MiB gathered: above the split size
	r := ring(t, be, steps, s)
	rng := rand.New(rand.NewPCG(1, 2))
	idx := make([]int64, n)
	wins := make([]kernels.Window, n/4)
	for i := range idx {
		idx[i] = rng.Int64N(steps)
	}
	for i := range wins {
		wins[i] = kernels.Window{Row: rng.Int64N(4), Start: rng.Int64N(5000), Len: rng.Int64N(5)}
	}
	big, small := arena(t, be, n*s), arena(t, be, n*s)
	bigMask, smallMask := arena(t, be, n), arena(t, be, n)
	if err := be.GatherRows([]kernels.Column{{Ring: r, StepBytes: s, Out: big}}, idx); err != nil {
		t.Fatal(err)
	}
	for i := range idx {
		if err := be.GatherRows([]kernels.Column{{Ring: r, StepBytes: s, Out: small, OutOff: int64(i) * s}}, idx[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(big.Bytes(), small.Bytes()) {
		t.Fatal("split gather differs from serial gathers")
	}
	if err := be.GatherWindows([]kernels.Column{{Ring: r, StepBytes: s, Out: big}}, wins, 4, 1024, bigMask, 0); err != nil {
		t.Fatal(err)
	}
	for i := range wins {
		col := []kernels.Column{{Ring: r, StepBytes: s, Out: small, OutOff: int64(i) * 4 * s}}
		if err := be.GatherWindows(col, wins[i:i+1], 4, 1024, smallMask, int64(i)*4); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(big.Bytes(), small.Bytes()) || !bytes.Equal(bigMask.Bytes(), smallMask.Bytes()) {
		t.Fatal("split window gather differs from serial gathers")
	}
}
