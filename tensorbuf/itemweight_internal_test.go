package tensorbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// itemWeightsErr returns an error unless every live item's record holds
// its slot's weight in the table's sum tree, bit for bit (a sample reads
// the record's copy), and every live record of a table without a tree
// holds 0. The caller holds tbl.mu.
func itemWeightsErr(tbl *Table) error {
	for s := range tbl.items {
		it := &tbl.items[s]
		want := 0.0
		if tbl.cfg.Selector == Prioritized && it.live {
			want = tbl.tree.get(s)
		} else if !it.live {
			continue
		}
		if math.Float64bits(it.w) != math.Float64bits(want) {
			return fmt.Errorf("table %q slot %d: record weight %v, tree %v", tbl.cfg.Name, s, it.w, want)
		}
	}
	return nil
}

// TestItemWeightFollowsTree changes a prioritized table's weights every
// way a table can (inserts, updates, a refused update that is undone,
// deletes, eviction by the writer, a checkpoint's load) and checks the
// records' copies after each, and that a sample's probabilities are the
// tree's weights over its total.
func TestItemWeightFollowsTree(t *testing.T) {
	b := newCkptBuffer(t, cpu.New(), 3, 16, 60) // wraps every row: evicted items
	check := func(b *Buffer, what string) {
		t.Helper()
		for _, tbl := range b.tableList {
			tbl.mu.Lock()
			err := itemWeightsErr(tbl)
			tbl.mu.Unlock()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	check(b, "built")
	per, err := b.Table("per")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bt, err := per.Sample(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	per.mu.Lock()
	total := per.tree.total()
	for k, key := range bt.Keys {
		s := int(uint32(key))
		if want := per.tree.get(s) / total; bt.Probabilities[k] != want {
			t.Errorf("draw %d (slot %d): probability %v, tree weight over total %v", k, s, bt.Probabilities[k], want)
		}
	}
	per.mu.Unlock()
	prios := make([]float64, len(bt.Keys))
	for k := range prios {
		prios[k] = float64(k) * 0.5 // slot 0 to weight 0
	}
	if err := per.UpdatePriorities(bt.Keys, prios); err != nil {
		t.Fatal(err)
	}
	check(b, "updated")
	// A refused update (the total would overflow) is undone leaf by leaf.
	big, err := b.NewTable(TableConfig{Name: "big", Selector: Prioritized, PriorityExponent: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for k := range 3 {
		key, err := big.Insert(Item{Row: k % 3, Start: b.Cursor(k%3) - 1, Len: 1, Priority: float64(k + 1)})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	huge := []float64{7, 0.6 * math.MaxFloat64, 0.6 * math.MaxFloat64}
	if err := big.UpdatePriorities(keys, huge); !errors.Is(err, ErrInvalidArg) {
		t.Fatalf("overflowing update: %v, want ErrInvalidArg", err)
	}
	check(b, "refused update")
	big.mu.Lock()
	w0 := big.items[uint32(keys[0])].w
	big.mu.Unlock()
	if w0 != 1 {
		t.Errorf("refused update left slot weight %v, want 1", w0)
	}
	per.Delete(bt.Keys[3])
	check(b, "deleted")
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	ckptAdd(t, b, w, 20) // evicts every item of the oldest steps
	_ = w.Close()
	check(b, "evicted")
	var buf bytes.Buffer
	if err := b.Save(&buf, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(&buf, LoadOptions{Backend: cpu.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	check(loaded, "loaded")
}
