package tensorbuf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// checkMirror flushes a table's mirror and compares it with the table:
// the first len(live) entries of the live list, and the record of every
// live slot.
func checkMirror(t *testing.T, tbl *Table, what string) {
	t.Helper()
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if err := tbl.flushMirrorLocked(); err != nil {
		t.Fatal(err)
	}
	m := tbl.dev
	be := tbl.b.be
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	recs := make([]kernels.ItemRec, m.slots)
	live := make([]int32, m.slots)
	if err := be.Download(unsafe.Slice((*byte)(unsafe.Pointer(&recs[0])), len(recs)*kernels.ItemRecSize), m.arena.arena, m.arena.offs[0]); err != nil {
		t.Fatal(err)
	}
	if err := be.Download(unsafe.Slice((*byte)(unsafe.Pointer(&live[0])), len(live)*kernels.LiveSize), m.arena.arena, m.arena.offs[1]); err != nil {
		t.Fatal(err)
	}
	for pos, s := range tbl.live {
		if live[pos] != s {
			t.Fatalf("%s: live[%d] = %d in the mirror, %d in the table", what, pos, live[pos], s)
		}
		it := &tbl.items[s]
		want := kernels.ItemRec{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len), Key: it.key}
		if recs[s] != want {
			t.Fatalf("%s: slot %d is %+v in the mirror, %+v in the table", what, s, recs[s], want)
		}
	}
	if m.prio != nil {
		checkDeviceTree(t, tbl, what)
	}
	if len(m.items) != 0 || len(m.lives) != 0 {
		t.Fatalf("%s: %d records and %d entries still marked after a flush", what, len(m.items), len(m.lives))
	}
}

// checkDeviceTree compares the device sum tree with the host tree bit
// for bit: the weights of every slot, the running sums of every level and
// the minima of every real node above the leaves and the root. The caller
// holds t.mu and has flushed the mirror.
func checkDeviceTree(t *testing.T, tbl *Table, what string) {
	t.Helper()
	m := tbl.dev
	if tbl.tree.n == 0 && m.treeN == 0 {
		return // no item yet: no tree
	}
	if m.treeN != int64(tbl.tree.n) {
		t.Fatalf("%s: device tree of %d leaves, host tree of %d", what, m.treeN, tbl.tree.n)
	}
	lay := kernels.Tree(m.treeN)
	dev := make([]float64, lay.Doubles)
	if err := tbl.b.be.Download(unsafe.Slice((*byte)(unsafe.Pointer(&dev[0])), 8*len(dev)), m.arena.arena, m.arena.offs[2]); err != nil {
		t.Fatal(err)
	}
	same := func(name string, got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: device tree %s[%d] = %v, host %v", what, name, i, got[i], want[i])
			}
		}
	}
	same("w", dev[:m.treeN], tbl.tree.w)
	if len(tbl.tree.sum) != lay.Levels {
		t.Fatalf("%s: %d levels on the device, %d on the host", what, lay.Levels, len(tbl.tree.sum))
	}
	for l := range lay.Levels {
		same(fmt.Sprintf("sum[%d]", l), dev[lay.Sum[l]:], tbl.tree.sum[l])
		if l > 0 {
			real := lay.Size[l-1] / 8
			same(fmt.Sprintf("min[%d]", l), dev[lay.Min[l]:], tbl.tree.min[l][:real])
		}
	}
	same("root min", dev[lay.Min[lay.Levels]:], tbl.tree.min[lay.Levels])
}

// TestMirrorFollowsChurn: after random inserts (into full tables too),
// deletes and adds that evict items, with flushes at random points (as
// samples make them), the mirror on the default backend holds the table's
// live list and records. The arena grows (the table passes 64 and 128
// slots) along the way.
func TestMirrorFollowsChurn(t *testing.T) {
	for _, tc := range []struct {
		sel            Selector
		maxSize, steps int
	}{{Uniform, 0, 300}, {Uniform, 50, 300}, {Uniform, 7, 200}, {Prioritized, 0, 300}, {Prioritized, 40, 200}} {
		t.Run(fmt.Sprintf("%v/max%d", tc.sel, tc.maxSize), func(t *testing.T) {
			be, err := DefaultBackend()
			if err != nil {
				t.Skip(err)
			}
			const envs, capacity = 4, 96
			b, err := New(Config{NumEnvs: envs, Capacity: capacity, Fields: ckptFields, Backend: be, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			tbl, err := b.NewTable(TableConfig{Name: "t", Selector: tc.sel, PriorityExponent: 0.7, MaxSize: tc.maxSize, DeviceSelection: true})
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			rng := rand.New(rand.NewPCG(uint64(tc.maxSize), 3))
			var keys []uint64
			grown := int64(0)
			for i := range tc.steps {
				ckptAdd(t, b, w, 1)
				for range rng.IntN(4) {
					row := rng.IntN(envs)
					l := 1 + rng.IntN(3)
					if b.Cursor(row)-b.Oldest(row) < int64(l) {
						continue
					}
					start := b.Oldest(row) + rng.Int64N(b.Cursor(row)-b.Oldest(row)-int64(l)+1)
					k, err := tbl.Insert(Item{Row: row, Start: start, Len: l, Priority: float64(rng.IntN(3)) * rng.Float64()})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
				for range rng.IntN(3) {
					if len(keys) > 0 {
						tbl.Delete(keys[rng.IntN(len(keys))])
					}
				}
				if tc.sel == Prioritized && len(keys) > 0 && rng.IntN(4) == 0 {
					k := keys[rng.IntN(len(keys))]
					_ = tbl.UpdatePriorities([]uint64{k, k}, []float64{rng.Float64(), 5 * rng.Float64()}) // unknown keys fail
				}
				if rng.IntN(5) == 0 {
					checkMirror(t, tbl, fmt.Sprintf("step %d", i))
					grown = max(grown, tbl.dev.slots)
				}
			}
			checkMirror(t, tbl, "end")
			if tc.maxSize == 0 && tc.sel == Uniform && grown < 128 {
				t.Errorf("mirror grew to %d slots only", grown)
			}
		})
	}
}

// TestDeviceUpdatesSurviveGrowth: priorities set by UpdatePrioritiesDevice
// reach the host tree (and Items' priorities) when the mirror moves to a
// larger arena, so the re-patch does not undo them, except where the host
// set a priority since (its value is the newer), and the device tree then
// still equals the host tree.
func TestDeviceUpdatesSurviveGrowth(t *testing.T) {
	be, err := DefaultBackend()
	if err != nil {
		t.Skip(err)
	}
	b, err := New(Config{NumEnvs: 2, Capacity: 256, Fields: ckptFields, Backend: be, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tbl, err := b.NewTable(TableConfig{Name: "t", Selector: Prioritized, DeviceSelection: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ckptAdd(t, b, w, 200)
	var keys []uint64
	for i := range 10 {
		k, err := tbl.Insert(Item{Row: i % 2, Start: int64(i), Len: 1, Priority: 1})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	bt := new(Batch)
	defer bt.Release()
	if err := tbl.SampleInto(context.Background(), bt, 4); err != nil { // the mirror exists
		t.Fatal(err)
	}
	prios := make([]float32, len(keys))
	for i := range prios {
		prios[i] = float32(i) + 0.5
	}
	kd := deviceTensor(t, be, keys)
	pd := deviceTensor(t, be, prios)
	if err := tbl.UpdatePrioritiesDevice(kd, pd); err != nil {
		t.Fatal(err)
	}
	// The host sets key 0 after the device did (not yet patched): the
	// host's value is the newer and must survive the growth.
	if err := tbl.UpdatePriorities(keys[:1], []float64{9}); err != nil {
		t.Fatal(err)
	}
	prios[0] = 9
	for i := range 100 { // past 64 slots: a new arena
		if _, err := tbl.Insert(Item{Row: i % 2, Start: 20 + int64(i), Len: 1, Priority: 2}); err != nil {
			t.Fatal(err)
		}
	}
	checkMirror(t, tbl, "after growth")
	// The learned priorities raise DefaultPriority's running maximum.
	if got := tbl.MaxPriority(); got != 9.5 {
		t.Errorf("running maximum %v after the device's priorities were learned, want 9.5", got)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	for i, k := range keys {
		s, ok := tbl.lookup(k)
		if !ok {
			t.Fatal("item gone")
		}
		if got := tbl.tree.get(int(s)); got != float64(prios[i]) || tbl.items[s].Priority != float64(prios[i]) {
			t.Fatalf("item %d: host weight %v, priority %v, want %v", i, got, tbl.items[s].Priority, prios[i])
		}
	}
	if err := itemWeightsErr(tbl); err != nil {
		t.Fatalf("after the device's priorities: %v", err)
	}
}

// deviceTensor returns a tensor in backend memory holding vals.
func deviceTensor[T uint64 | float32](t *testing.T, be Backend, vals []T) *tensor.Dense {
	t.Helper()
	dt := tensor.Float32
	if _, ok := any(vals).([]uint64); ok {
		dt = tensor.Uint64
	}
	n := len(vals) * int(dt.Size())
	a, err := be.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Free(a) })
	if err := be.Upload(a, 0, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), n)); err != nil {
		t.Fatal(err)
	}
	d, err := be.Tensor(a, 0, dt, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
