package kernelargs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trajring/trajring/kernels"
)

var (
	errBounds = errors.New("test: out of bounds")
	errArena  = errors.New("test: foreign arena")
)

// fake is an arena of the test backend; a nil *fake or another type is
// foreign.
type fake struct{ size int64 }

func (f *fake) Size() int64 { return f.size }

type fakeArenas struct{}

func (fakeArenas) Arena(a kernels.Arena) (*fake, int64, error) {
	f, ok := a.(*fake)
	if !ok || f == nil {
		return nil, 0, fmt.Errorf("%w: %T", errArena, a)
	}
	return f, f.size, nil
}

var k = Checker[*fake, fakeArenas]{Bounds: errBounds}

func TestGather(t *testing.T) {
	ring, out, next := &fake{size: 10 * 8}, &fake{size: 4 * 8}, &fake{size: 4 * 8}
	col := func(mod func(*kernels.Column)) []kernels.Column {
		c := kernels.Column{Ring: ring, StepBytes: 8, Out: out, NextOut: next}
		if mod != nil {
			mod(&c)
		}
		return []kernels.Column{c}
	}
	cases := []struct {
		name  string
		cols  []kernels.Column
		idx   []int64
		next  bool
		is    error
		says  string
		total int64
	}{
		{"fits", col(nil), []int64{0, 9, 3, 3}, true, nil, "", 32},
		{"writes its ring", col(func(c *kernels.Column) { c.Out = ring }), []int64{0}, false, errBounds, "column 0 writes a ring arena", 0},
		{"foreign ring", col(func(c *kernels.Column) { c.Ring = (*fake)(nil) }), []int64{0}, false, errArena, "column 0 ring: ", 0},
		{"step past stride", col(func(c *kernels.Column) { c.Stride, c.Offset = 8, 4 }), []int64{0}, false, errBounds, "column 0: step of 8 bytes at offset 4 of a stride of 8", 0},
		{"foreign output", col(func(c *kernels.Column) { c.Out = nil }), []int64{0}, false, errArena, "column 0 output: ", 0},
		{"output too small", col(nil), []int64{0, 1, 2, 3, 4}, false, errBounds, "column 0: 5 steps of 8 at 0 into 32", 0},
		{"successors too small", col(func(c *kernels.Column) { c.NextOff = 8 }), []int64{0, 1, 2, 3}, true, errBounds, "column 0: 4 successors of 8 at 8 into 32", 0},
		{"successors unchecked without next", col(func(c *kernels.Column) { c.NextOff = 8 }), []int64{0, 1, 2, 3}, false, nil, "", 32},
		{"index past the ring", col(nil), []int64{0, 10}, false, errBounds, "column 0: test: out of bounds: index 1 is 10, arena holds 10 steps", 0},
		{"negative index", col(nil), []int64{-1}, false, errBounds, "index 0 is -1", 0},
	}
	for _, tc := range cases {
		rings, outs, nexts := make([]*fake, 1), make([]*fake, 1), make([]*fake, 1)
		total, err := k.Gather(tc.cols, tc.idx, int64(len(tc.idx)), tc.next, rings, outs, nexts)
		switch {
		case tc.is == nil && (err != nil || total != tc.total || rings[0] != tc.cols[0].Ring || outs[0] != out || (nexts[0] == next) != tc.next):
			t.Errorf("%s: %d bytes, %v, arenas %v %v %v; want %d", tc.name, total, err, rings, outs, nexts, tc.total)
		case tc.is != nil && (!errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.is, tc.says)
		}
	}
}

func TestWindows(t *testing.T) {
	// Two rows of capacity 4 in the ring; windows of up to 3 steps.
	ring, out, mask := &fake{size: 8 * 2}, &fake{size: 6 * 2}, &fake{size: 6}
	cols := func(mod func(*kernels.Column)) []kernels.Column {
		c := kernels.Column{Ring: ring, StepBytes: 2, Out: out}
		if mod != nil {
			mod(&c)
		}
		return []kernels.Column{c}
	}
	wins := []kernels.Window{{Row: 0, Start: 5, Len: 3}, {Row: 1, Start: 0, Len: 0}}
	cases := []struct {
		name     string
		cols     []kernels.Column
		wins     []kernels.Window
		seqLen   int64
		capacity int64
		maskOff  int64
		is       error
		says     string
	}{
		{"fits", cols(nil), wins, 3, 4, 0, nil, ""},
		{"capacity 0", cols(nil), wins, 3, 0, 0, errBounds, "sequence length 3, capacity 0"},
		{"writes its ring", cols(func(c *kernels.Column) { c.Out = ring }), wins, 3, 4, 0, errBounds, "column 0 writes a ring arena"},
		{"foreign output", cols(func(c *kernels.Column) { c.Out = nil }), wins, 3, 4, 0, errArena, "column 0 output: "},
		{"ring under one row", cols(nil), nil, 3, 9, 0, errBounds, "column 0: step of 2 bytes at offset 0 of a stride of 0, capacity 9"},
		{"output too small", cols(nil), wins, 4, 4, 0, errBounds, "column 0: 8 steps of 2 bytes at 0 into 12"},
		{"pad of another size", cols(func(c *kernels.Column) { c.Pad = []byte{1} }), wins, 3, 4, 0, errBounds, "column 0: pad of 1 bytes for steps of 2"},
		{"row past the ring", cols(nil), []kernels.Window{{Row: 2}}, 3, 4, 0, errBounds, "window 0 {Row:2 Start:0 Len:0} (rows 2, capacity 4, length 3)"},
		{"longer than the sequence", cols(nil), []kernels.Window{{Len: 3}, {Len: 4}}, 3, 4, 0, errBounds, "window 1 {Row:0 Start:0 Len:4} (rows 2, capacity 4, length 3)"},
		{"mask past its arena", cols(nil), wins, 3, 4, 1, errBounds, "mask of 6 at 1 into 6"},
	}
	for _, tc := range cases {
		tc.cols[0].Stride = 0
		rings, outs := make([]*fake, 1), make([]*fake, 1)
		err := func() error {
			n, rows, total, err := k.Windows(tc.cols, tc.wins, tc.seqLen, tc.capacity, rings, outs)
			if err != nil {
				return err
			}
			if want := int64(len(tc.wins)) * tc.seqLen; n != want || rows != 2 || total != 2*want {
				return fmt.Errorf("n %d rows %d total %d, want %d, 2, %d", n, rows, total, want, 2*want)
			}
			if err := k.Window(tc.wins, rows, tc.seqLen, tc.capacity); err != nil {
				return err
			}
			m, err := k.Mask(mask, tc.maskOff, n)
			if err == nil && m != mask {
				return fmt.Errorf("mask %v", m)
			}
			return err
		}()
		switch {
		case tc.is == nil && (err != nil || rings[0] != ring || outs[0] != out):
			t.Errorf("%s: %v, arenas %v %v", tc.name, err, rings[0], outs[0])
		case tc.is != nil && (!errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.is, tc.says)
		}
	}
	if m, err := k.Mask(nil, -5, 10); m != nil || err != nil {
		t.Errorf("no mask: %v, %v", m, err)
	}
	if _, err := k.Mask(&fake{}, 0, 0); err != nil {
		t.Errorf("empty mask in an empty arena: %v", err)
	}
	if _, err := k.Mask(kernels.Arena(nil), 0, 0); err != nil {
		t.Errorf("nil interface mask: %v", err)
	}
}

// TestIndices checks that the one-scan check of an index list gives
// Index's verdict and message for every ring size.
func TestIndices(t *testing.T) {
	for _, idx := range [][]int64{nil, {3, 1, 4}, {0, -2, 5}, {7, 7}} {
		ic := k.Indices(idx)
		for _, steps := range []int64{0, 4, 5, 8} {
			got, want := ic.Check(steps), k.Index(idx, steps)
			if fmt.Sprint(got) != fmt.Sprint(want) || (want != nil && !errors.Is(got, errBounds)) {
				t.Errorf("%v in %d steps: %v, want %v", idx, steps, got, want)
			}
		}
	}
}
