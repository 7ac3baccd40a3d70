package tensorbuf_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestBatchFixedLen checks that a batch with FixedLen keeps its L and its
// memory whatever items are drawn, and that a table holding a longer item
// refuses the sample before drawing, leaving the batch as it was.
func TestBatchFixedLen(t *testing.T) {
	b := newBuffer(t, 1, 8)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 6, 0)
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "fifo", Selector: tensorbuf.FIFO, MaxTimesSampled: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Insert(tensorbuf.Item{Row: 0, Start: 1, Len: 2, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Insert(tensorbuf.Item{Row: 0, Start: 2, Len: 1, Pad: 1, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if got := b.TableNames(); !slices.Equal(got, []string{"fifo"}) {
		t.Fatalf("TableNames = %v, want [fifo]", got)
	}
	bt := &tensorbuf.Batch{FixedLen: 4}
	if err := tb.SampleInto(context.Background(), bt, 1); err != nil {
		t.Fatal(err)
	}
	if n, l := bt.Len(); n != 1 || l != 4 {
		t.Fatalf("Len = (%d, %d), want (1, 4)", n, l)
	}
	if mask := hostMask(t, bt); !slices.Equal(mask, []bool{true, true, false, false}) {
		t.Fatalf("mask = %v, want the item's 2 steps then 2 of padding", mask)
	}
	obs := bt.Fields["obs"]
	ptr := obs.Uintptr()
	if err := tb.SampleInto(context.Background(), bt, 1); err != nil { // the 1+1 item
		t.Fatal(err)
	}
	if n, l := bt.Len(); n != 1 || l != 4 || bt.Fields["obs"].Uintptr() != ptr {
		t.Fatalf("second sample: Len (%d, %d), memory moved %v; want (1, 4) in place", n, l, bt.Fields["obs"].Uintptr() != ptr)
	}
	if mask := hostMask(t, bt); !slices.Equal(mask, []bool{true, false, false, false}) {
		t.Fatalf("mask = %v, want one real step", mask)
	}

	// A table with an item longer than FixedLen refuses before drawing.
	if _, err := tb.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 5, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	size := tb.Size()
	err = tb.SampleInto(context.Background(), bt, 1)
	if !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("sample with an item of 5 steps into FixedLen 4: %v, want ErrInvalidArg", err)
	}
	if tb.Size() != size || bt.Fields["obs"].Uintptr() != ptr {
		t.Fatalf("a refused sample changed the table (%d items, want %d) or the batch", tb.Size(), size)
	}
	bt.FixedLen = -1
	if err := tb.SampleInto(context.Background(), bt, 1); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("FixedLen -1: %v, want ErrInvalidArg", err)
	}
}

// hostMask returns a host copy of a batch's mask (device memory in cuda
// builds).
func hostMask(t *testing.T, bt *tensorbuf.Batch) []bool {
	t.Helper()
	h, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	return slices.Clone(h.Mask.Data().([]bool))
}
