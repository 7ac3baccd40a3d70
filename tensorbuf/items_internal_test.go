//go:build linux

package tensorbuf

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
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
		if mapped {
			checkMapped(t, tb, 0) // loaded straight into a mapping
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
			tb.mu.Lock()
			lm, live := tb.liveMap, tb.live
			tb.mu.Unlock()
			if lm == nil || unsafe.Pointer(unsafe.SliceData(live)) != unsafe.Pointer(unsafe.SliceData(lm.ref.b)) {
				t.Fatalf("table %q: %d live slots (%d bytes) not in their mapping", tb.cfg.Name, len(live), 4*len(live))
			}
		}
		return stateString(t, got)
	}
	var hs, ms string
	withItemsMap(1<<62, 2<<20, func() { hs = more(heap, false) })
	withItemsMap(1<<10, 4<<10, func() { ms = more(mapped, true) })
	if hs != ms {
		t.Fatalf("after a load and more inserts, states differ:\nheap:\n%s\nmapped:\n%s", hs, ms)
	}
}

// TestMappedItemsUnmappedWhenDropped checks that a dropped table's
// mapping is unmapped by its cleanup after a garbage collection.
func TestMappedItemsUnmappedWhenDropped(t *testing.T) {
	for range 3 { // earlier tests' dropped tables are unmapped first
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	before := itemsUnmapped.Load()
	func() {
		var b *Buffer
		withItemsMap(1<<10, 4<<10, func() {
			var err error
			b, err = New(Config{NumEnvs: 1, Capacity: 64, Fields: ckptFields, Backend: cpu.New(), Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			tb, err := b.NewTable(TableConfig{Name: "u", Selector: Uniform, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			ckptAdd(t, b, w, 1)
			_ = w.Close()
			for range 100 {
				if _, err := tb.Insert(Item{Row: 0, Start: 0, Len: 1, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
			checkMapped(t, tb, 1)
		})
		_ = b.Close()
	}()
	for range 100 {
		runtime.GC()
		if itemsUnmapped.Load() > before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no item mapping was unmapped after the table was dropped")
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

// TestMappedSumTreeSameTree grows a sum tree through several doublings
// with its large levels in mappings (from 1 KiB on) and another on the
// heap, setting the same random weights, and checks that every level is
// the same bits, that both find the same slots, and that each doubling
// unmapped the levels it replaced.
func TestMappedSumTreeSameTree(t *testing.T) {
	var heap, mapped sumTree
	rng := rand.New(rand.NewPCG(3, 4))
	for _, slots := range []int{100, 1000, 5000, 20000} {
		oldMem := mapped.mem
		withItemsMap(1<<62, 2<<20, func() { heap.grow(slots) })
		withItemsMap(1<<10, 4<<10, func() { mapped.grow(slots) })
		if oldMem != nil && oldMem.ref.bs != nil {
			t.Fatalf("%d slots: the replaced levels are still mapped", slots)
		}
		if mapped.mem == nil || len(mapped.mem.ref.bs) == 0 || heap.mem != nil {
			t.Fatalf("%d slots: mapped tree holds %v, heap tree %v", slots, mapped.mem, heap.mem)
		}
		for range slots {
			s, w := rng.IntN(slots), rng.Float64()*10
			if rng.IntN(5) == 0 {
				w = 0
			}
			heap.set(s, w)
			mapped.set(s, w)
		}
		same := func(a, b []float64) bool {
			for i := range a {
				if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
					return false
				}
			}
			return len(a) == len(b)
		}
		if !same(heap.w, mapped.w) {
			t.Fatalf("%d slots: weights differ", slots)
		}
		for l := range heap.sum {
			if !same(heap.sum[l], mapped.sum[l]) || !same(heap.min[l], mapped.min[l]) {
				t.Fatalf("%d slots: level %d differs", slots, l)
			}
		}
		us := make([]float64, 256)
		for i := range us {
			us[i] = rng.Float64() * heap.total()
		}
		a, b := make([]int32, len(us)), make([]int32, len(us))
		heap.findMany(slices.Clone(us), a) // findMany overwrites its draws
		mapped.findMany(slices.Clone(us), b)
		if !slices.Equal(a, b) {
			t.Fatalf("%d slots: draws differ", slots)
		}
		for k, u := range us {
			if f := mapped.find(u); int(b[k]) != f {
				t.Fatalf("%d slots: draw %d found %d by findMany, %d by find", slots, k, b[k], f)
			}
		}
	}
}

// TestSnapshotOffHeap: a checkpoint's copies of a table's records and
// lists from itemsMapMin bytes on live in anonymous mappings, unmapped
// when Save returns (and when a file-backed buffer's Sync does), and the
// checkpoint is the same bytes as with copies on the heap.
func TestSnapshotOffHeap(t *testing.T) {
	const envs, capacity, steps = 3, 64, 400
	b := newCkptBuffer(t, cpu.New(), envs, capacity, steps)
	save := func() []byte {
		var buf bytes.Buffer
		if err := b.Save(&buf, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	heap := save()
	m0, u0 := snapMapped.Load(), snapUnmapped.Load()
	var mapped []byte
	withItemsMap(1<<10, 4<<10, func() { mapped = save() })
	m, u := snapMapped.Load()-m0, snapUnmapped.Load()-u0
	if !bytes.Equal(heap, mapped) {
		t.Fatal("the checkpoint with off-heap copies differs from the one with heap copies")
	}
	if m == 0 || u != m {
		t.Fatalf("Save mapped %d copies and unmapped %d: want some, all unmapped", m, u)
	}

	dir := t.TempDir()
	fb, err := New(Config{NumEnvs: envs, Capacity: capacity, Fields: ckptFields, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	tb, err := fb.NewTable(TableConfig{Name: "u", Selector: Uniform, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w, err := fb.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	ckptAdd(t, fb, w, 40)
	for i := range 2000 {
		if _, err := tb.Insert(Item{Row: i % envs, Start: int64(i % 40), Len: 1, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
	m0, u0 = snapMapped.Load(), snapUnmapped.Load()
	withItemsMap(1<<10, 4<<10, func() {
		if err := fb.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if m, u := snapMapped.Load()-m0, snapUnmapped.Load()-u0; m == 0 || u != m {
		t.Fatalf("Sync mapped %d copies and unmapped %d: want some, all unmapped", m, u)
	}
}
