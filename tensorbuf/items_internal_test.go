package tensorbuf

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
)

// withItemsMap sets the item-mapping threshold and alignment for one
// build, then puts the defaults back.
func withItemsMap(min, align int64, f func()) {
	m, a := itemsMapMin, itemsMapAlign
	itemsMapMin, itemsMapAlign = min, align
	defer func() { itemsMapMin, itemsMapAlign = m, a }()
	f()
}

// TestMappedItemsSameState builds the checkpoint tests' buffer (every
// selector, evictions, deletes, priority updates, samples) once with
// item records on the Go heap and once in mappings grown by remapping
// from 1 KiB on, and checks that both end in the same state, exactly;
// then that a checkpoint of each loads and goes on (the loaded records,
// on the heap, move into a new mapping as the table grows) to the same
// state again.
func TestMappedItemsSameState(t *testing.T) {
	const envs, capacity, steps = 3, 64, 400
	var heap, mapped *Buffer
	withItemsMap(1<<62, 2<<20, func() { heap = newCkptBuffer(t, cpu.New(), envs, capacity, steps) })
	withItemsMap(1<<10, 4<<10, func() { mapped = newCkptBuffer(t, cpu.New(), envs, capacity, steps) })
	if h, m := stateString(t, heap), stateString(t, mapped); h != m {
		t.Fatalf("states differ:\nheap:\n%s\nmapped:\n%s", h, m)
	}
	per, err := mapped.Table("per")
	if err != nil {
		t.Fatal(err)
	}
	checkMapped(t, per, 1)
	if tb, _ := heap.Table("per"); tb.itemMap != nil {
		t.Fatal("heap build: per's records were mapped")
	}

	more := func(b *Buffer, mapped bool) string {
		var buf bytes.Buffer
		if err := b.Save(&buf, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := Load(&buf, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = got.Close() })
		tb, err := got.Table("per")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := range 300 {
			row := i % envs
			if _, err := tb.Insert(Item{Row: row, Start: got.Cursor(row) - 1, Len: 1, Priority: float64(1 + i%5)}); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				bt, err := tb.Sample(ctx, 4)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.UpdatePriorities32(bt.Keys, []float32{0.5, 1, 2, 3}); err != nil {
					t.Fatal(err)
				}
				_ = bt.Release()
			}
		}
		if mapped {
			checkMapped(t, tb, 2)
		}
		return stateString(t, got)
	}
	var hs, ms string
	withItemsMap(1<<62, 2<<20, func() { hs = more(heap, false) })
	withItemsMap(1<<10, 4<<10, func() { ms = more(mapped, true) })
	if hs != ms {
		t.Fatalf("after a load and more inserts, states differ:\nheap:\n%s\nmapped:\n%s", hs, ms)
	}
	heap, mapped = nil, nil
	runtime.GC() // the dropped tables' mappings are unmapped by their cleanups
	runtime.GC()
}

// checkMapped fails unless tb's records live in its mapping and it was
// grown in place at least remaps times.
func checkMapped(t *testing.T, tb *Table, remaps int) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.itemMap == nil {
		t.Fatalf("table %q: %d records (%d bytes) not mapped", tb.cfg.Name, len(tb.items), int64(len(tb.items))*itemSize)
	}
	base := unsafe.Pointer(unsafe.SliceData(tb.itemMap.ref.b))
	if unsafe.Pointer(unsafe.SliceData(tb.items)) != base || int64(cap(tb.items))*itemSize > int64(len(tb.itemMap.ref.b)) {
		t.Fatalf("table %q: records at %p (cap %d) outside the mapping at %p (%d bytes)", tb.cfg.Name,
			unsafe.SliceData(tb.items), cap(tb.items), base, len(tb.itemMap.ref.b))
	}
	if tb.itemMap.remaps < remaps {
		t.Fatalf("table %q: grown in place %d times, want at least %d", tb.cfg.Name, tb.itemMap.remaps, remaps)
	}
}
