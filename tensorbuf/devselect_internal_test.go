package tensorbuf

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
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
	if len(m.items) != 0 || len(m.lives) != 0 {
		t.Fatalf("%s: %d records and %d entries still marked after a flush", what, len(m.items), len(m.lives))
	}
}

// TestMirrorFollowsChurn: after random inserts (into full tables too),
// deletes and adds that evict items, with flushes at random points (as
// samples make them), the mirror on the default backend holds the table's
// live list and records. The arena grows (the table passes 64 and 128
// slots) along the way.
func TestMirrorFollowsChurn(t *testing.T) {
	for _, tc := range []struct {
		maxSize, steps int
	}{{0, 300}, {50, 300}, {7, 200}} {
		t.Run(fmt.Sprintf("max%d", tc.maxSize), func(t *testing.T) {
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
			tbl, err := b.NewTable(TableConfig{Name: "t", MaxSize: tc.maxSize, DeviceSelection: true})
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
					k, err := tbl.Insert(Item{Row: row, Start: start, Len: l})
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
				if rng.IntN(5) == 0 {
					checkMirror(t, tbl, fmt.Sprintf("step %d", i))
					grown = max(grown, tbl.dev.slots)
				}
			}
			checkMirror(t, tbl, "end")
			if tc.maxSize == 0 && grown < 128 {
				t.Errorf("mirror grew to %d slots only", grown)
			}
		})
	}
}
