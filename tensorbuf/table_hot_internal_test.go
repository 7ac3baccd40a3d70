package tensorbuf

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// checkHotLocked reports where t.hot is not the copy of t's live items in
// live order (see hotItem). The caller holds t.mu.
func (t *Table) checkHotLocked() error {
	if !t.keepsHot() {
		if len(t.hot) != 0 {
			return fmt.Errorf("a %v table keeps %d hot items", t.cfg.Selector, len(t.hot))
		}
		return nil
	}
	if len(t.hot) != len(t.live) {
		return fmt.Errorf("%d hot items, %d live", len(t.hot), len(t.live))
	}
	for i, s := range t.live {
		h, it := &t.hot[i], &t.items[s]
		if h.Item != it.Item || h.key != it.key { // a key names its slot
			return fmt.Errorf("hot item %d is %+v key %d, live slot %d %+v key %d", i, h.Item, h.key, s, it.Item, it.key)
		}
		if t.cfg.MaxTimesSampled > 0 && h.sampled != 0 {
			return fmt.Errorf("hot item %d counts %d draws in a table with MaxTimesSampled", i, h.sampled)
		}
	}
	return nil
}

// timesSampled returns slot s's whole times-sampled count. The caller
// holds t.mu.
func (t *Table) timesSampled(s int32) int {
	it := &t.items[s]
	n := it.timesSampled
	if t.keepsHot() && it.live {
		n += int(t.hot[it.pos].sampled)
	}
	return n
}

// TestHotItemsFollowTheTable: through inserts, samples, priority updates,
// deletes, evictions and a checkpoint round trip, a uniform table's hot
// copy stays its live items in live order, each item's times-sampled count
// (record plus copy) is the number of times samples returned its key, and
// a saved and loaded table carries the same counts.
func TestHotItemsFollowTheTable(t *testing.T) {
	t.Run("kept", func(t *testing.T) { testHotItems(t, 1<<24) })
	// Past the bound after the 6th insert: the copy's counts go to the
	// records and the table draws through the live list.
	t.Run("dropped", func(t *testing.T) { testHotItems(t, 5) })
}

func testHotItems(t *testing.T, bound int) {
	defer func(was int) { hotMaxItems = was }(hotMaxItems)
	hotMaxItems = bound
	b := newCkptBuffer(t, cpu.New(), 2, 16, 4)
	tbl, err := b.NewTable(TableConfig{Name: "hot", Selector: Uniform, MaxSize: 12, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[uint64]int{}
	check := func(stage string) {
		t.Helper()
		tbl.mu.Lock()
		defer tbl.mu.Unlock()
		if err := tbl.checkHotLocked(); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		for _, s := range tbl.live {
			if got, want := tbl.timesSampled(s), drawn[tbl.items[s].key]; got != want {
				t.Fatalf("%s: slot %d sampled %d times, samples returned its key %d times", stage, s, got, want)
			}
		}
	}
	var keys []uint64
	for i := range 16 { // more than MaxSize: the oldest are evicted
		k, err := tbl.Insert(Item{Row: i % 2, Start: int64(i/2) % 4, Len: 1, Priority: float64(i)})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	check("inserts")
	if kept := tbl.keepsHot(); kept != (bound >= 12) {
		t.Fatalf("keepsHot %v with %d live items and a bound of %d", kept, tbl.Size(), bound)
	}
	var bt Batch
	defer bt.Release()
	sample := func(n int) {
		if err := tbl.SampleInto(context.Background(), &bt, n); err != nil {
			t.Fatal(err)
		}
		for k, key := range bt.Keys {
			drawn[key]++
			if bt.Probabilities[k] != 1/float64(tbl.Size()) || bt.Weights[k] != 1 {
				t.Fatalf("draw %d: probability %v weight %v", k, bt.Probabilities[k], bt.Weights[k])
			}
		}
	}
	for range 20 {
		sample(7)
	}
	check("samples")
	if err := tbl.UpdatePriorities(keys[len(keys)-2:], []float64{7.5, 8.5}); err != nil {
		t.Fatal(err)
	}
	tbl.Delete(keys[len(keys)-5 : len(keys)-3]...)
	check("updates and deletes")
	sample(64)
	for _, k := range keys[len(keys)-2:] {
		if got := bt.Items[indexOf(bt.Keys, k)].Priority; got != 7.5 && got != 8.5 {
			t.Fatalf("item %d sampled with priority %v after the update", k, got)
		}
	}
	check("samples after deletes")

	loaded, err := Load(bytes.NewReader(saveBytes(t, b, SaveOptions{})), LoadOptions{Backend: cpu.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	var t2 *Table
	for _, x := range loaded.tableList {
		if x.cfg.Name == "hot" {
			t2 = x
		}
	}
	t2.mu.Lock()
	defer t2.mu.Unlock() // before loaded.Close, which takes it
	if err := t2.checkHotLocked(); err != nil {
		t.Fatalf("loaded: %v", err)
	}
	for _, s := range t2.live {
		if got, want := t2.timesSampled(s), drawn[t2.items[s].key]; got != want {
			t.Fatalf("loaded: slot %d sampled %d times, want %d", s, got, want)
		}
	}
}

// indexOf returns the index of k in keys, or -1.
func indexOf(keys []uint64, k uint64) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// TestHotAndListDrawsAgree: a uniform table drawing through its hot copy
// and one past hotMaxItems drawing through the live list and the records
// return the same items, keys, probabilities, weights and windows for the
// same seed, call after call, with deletes and inserts between calls.
func TestHotAndListDrawsAgree(t *testing.T) {
	defer func(was int) { hotMaxItems = was }(hotMaxItems)
	b := newCkptBuffer(t, cpu.New(), 2, 16, 4)
	var tabs [2]*Table
	for i, bound := range []int{1 << 24, 0} {
		hotMaxItems = bound
		tb, err := b.NewTable(TableConfig{Name: fmt.Sprintf("u%d", i), Selector: Uniform, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 40 {
			if _, err := tb.Insert(Item{Row: j % 2, Start: int64(j % 4), Len: 1 + j%2, Pad: j % 3, Priority: float64(j)}); err != nil {
				t.Fatal(err)
			}
		}
		tabs[i] = tb
	}
	if !tabs[0].keepsHot() || tabs[1].keepsHot() {
		t.Fatalf("keepsHot %v %v, want true false", tabs[0].keepsHot(), tabs[1].keepsHot())
	}
	var bts [2]Batch
	defer bts[0].Release()
	defer bts[1].Release()
	for call := range 12 {
		for i, tb := range tabs {
			if err := tb.SampleInto(context.Background(), &bts[i], 1+call*7); err != nil {
				t.Fatal(err)
			}
		}
		a, c := &bts[0], &bts[1]
		if !slices.Equal(a.Items, c.Items) || !slices.Equal(a.Keys, c.Keys) || !slices.Equal(a.Probabilities, c.Probabilities) ||
			!slices.Equal(a.Weights, c.Weights) || !slices.Equal(a.wins, c.wins) || a.FixedLen != c.FixedLen {
			t.Fatalf("call %d: hot draws %v keys %v, list draws %v keys %v", call, a.Items, a.Keys, c.Items, c.Keys)
		}
		if len(a.Keys) != 1+call*7 {
			t.Fatalf("call %d: %d keys", call, len(a.Keys))
		}
		for _, tb := range tabs {
			tb.Delete(a.Keys[0])
			if _, err := tb.Insert(Item{Row: call % 2, Start: int64(call % 4), Len: 1, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
