package tensorbuf

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// heapBuffer returns a buffer of rows rows, each holding capacity steps
// of one float32 field, full.
func heapBuffer(t *testing.T, rows, capacity int) *Buffer {
	t.Helper()
	b, err := New(Config{NumEnvs: rows, Capacity: capacity, Fields: []Field{{Name: "x", Role: Observation, DType: Float32}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range capacity {
		addSteps(t, w, rows)
	}
	return b
}

func addSteps(t *testing.T, w *Writer, rows int) {
	t.Helper()
	s := &Step{Values: map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(rows), tensor.WithBacking(make([]float32, rows)))}}
	for r := range rows {
		s.Rows = append(s.Rows, r)
		s.StepType = append(s.StepType, Mid)
		s.NextStepType = append(s.NextStepType, Mid)
		s.Reward = append(s.Reward, 0)
		s.Discount = append(s.Discount, 1)
	}
	if err := w.Add(s); err != nil {
		t.Fatal(err)
	}
}

// checkHeaps verifies the start heaps of a table: together they hold
// exactly its live items, each at the index it records, in heap order,
// and their arrays are at most slack entries long.
func checkHeaps(t *testing.T, tbl *Table, slack int) {
	t.Helper()
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	n := 0
	for r, h := range tbl.starts {
		n += len(h)
		if cap(h) > slack {
			t.Fatalf("row %d: heap of %d entries has an array of %d (table holds %d items)", r, len(h), cap(h), len(tbl.live))
		}
		for i, e := range h {
			it := &tbl.items[e.slot]
			if !it.live || it.Row != r || it.Start != e.start || it.hpos != i {
				t.Fatalf("row %d entry %d: %+v for item %+v", r, i, e, *it)
			}
			if i > 0 && h[(i-1)/2].start > e.start {
				t.Fatalf("row %d: entry %d breaks heap order", r, i)
			}
		}
	}
	if n != len(tbl.live) {
		t.Fatalf("heaps hold %d entries, table %d items", n, len(tbl.live))
	}
}

// TestStartHeapsBoundedByLiveItems: on rows that get no new steps (so the
// ring never evicts), items removed by MaxTimesSampled, by MaxSize and by
// Delete leave their row's start heap at once; before, each stayed until
// the ring overwrote its start step, and the heaps grew with every insert.
func TestStartHeapsBoundedByLiveItems(t *testing.T) {
	cycles := 200_000
	if testing.Short() {
		cycles = 20_000
	}
	const rows, capacity, live = 2, 16, 8
	b := heapBuffer(t, rows, capacity)
	sampled, err := b.NewTable(TableConfig{Name: "sampled", Selector: Prioritized, MaxTimesSampled: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := b.NewTable(TableConfig{Name: "pushed", MaxSize: live})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := b.NewTable(TableConfig{Name: "deleted", Selector: LIFO})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	item := func() Item {
		return Item{Row: rng.IntN(rows), Start: rng.Int64N(capacity), Len: 1, Priority: 1 + rng.Float64()}
	}
	var keys []uint64
	var bt Batch
	ctx := context.Background()
	for i := range cycles {
		switch i % 3 {
		case 0:
			if _, err := sampled.Insert(item()); err != nil {
				t.Fatal(err)
			}
			if sampled.Size() == live {
				// The whole table, one sample each: every item sampled out.
				if err := sampled.SampleInto(ctx, &bt, live); err != nil {
					t.Fatal(err)
				}
			}
		case 1:
			if _, err := pushed.Insert(item()); err != nil {
				t.Fatal(err)
			}
		case 2:
			k, err := deleted.Insert(item())
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
			if len(keys) == live {
				deleted.Delete(keys...)
				keys = keys[:0]
			}
		}
	}
	_ = bt.Release()
	for _, tbl := range []*Table{sampled, pushed, deleted} {
		if n := tbl.Size(); n > live {
			t.Fatalf("%s holds %d items", tbl.Name(), n)
		}
		checkHeaps(t, tbl, 4*live)
		if n := len(tbl.items); n > 2*live {
			t.Fatalf("%s: %d item slots for at most %d live items", tbl.Name(), n, live)
		}
	}

	// Eviction by the ring still finds every item through the heaps.
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range capacity {
		addSteps(t, w, rows)
	}
	for _, tbl := range []*Table{sampled, pushed, deleted} {
		if n := tbl.Size(); n != 0 {
			t.Fatalf("%s holds %d items after the ring overwrote every start step", tbl.Name(), n)
		}
		checkHeaps(t, tbl, 4*live)
	}
}

// TestStartHeapShrinks: a heap that held many items gives its array back
// once they are gone.
func TestStartHeapShrinks(t *testing.T) {
	b := heapBuffer(t, 1, 4)
	tbl, err := b.NewTable(TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for i := range 10_000 {
		k, err := tbl.Insert(Item{Row: 0, Start: int64(i % 4), Len: 1})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	checkHeaps(t, tbl, math.MaxInt)
	tbl.Delete(keys[:9_990]...)
	checkHeaps(t, tbl, 64)
	tbl.Delete(keys...)
	checkHeaps(t, tbl, 64)
}

// TestCheckWindows: batch sizes that overflow int64 are refused before
// anything is allocated.
func TestCheckWindows(t *testing.T) {
	b := heapBuffer(t, 1, 4)
	for _, tc := range []struct {
		n, l int
		ok   bool
	}{
		{1, 4, true},
		{maxBatch, 4, true},
		{maxBatch, 1 << 32, false},
		{math.MaxInt, 2, false},
		{1 << 40, 1 << 20, false},
	} {
		err := b.checkWindows(tc.n, tc.l)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidArg) {
			t.Errorf("checkWindows(%d, %d) = %v", tc.n, tc.l, err)
		}
	}
}
