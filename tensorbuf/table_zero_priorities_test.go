package tensorbuf_test

import (
	"context"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestPrioritizedAllZeroIsUniform: a Prioritized table whose priorities
// are all 0 samples uniformly, each item with probability 1/N and
// importance weight 1, as Reverb's PrioritizedSelector does (the
// Prioritized doc comment); once one item has a positive priority only
// it is drawn.
func TestPrioritizedAllZeroIsUniform(t *testing.T) {
	b := newBuffer(t, 1, 16)
	fill(t, b, newModel(1, 16), [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2), mids(1, 3), mids(1, 4)})
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: tensorbuf.Prioritized, Beta: 0.5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for s := range 4 {
		k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: int64(s), Len: 1, Priority: 0})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	seen := map[uint64]int{}
	for range 100 {
		if err := tbl.SampleInto(context.Background(), bt, 8); err != nil {
			t.Fatal(err)
		}
		for i, k := range bt.Keys {
			seen[k]++
			if bt.Probabilities[i] != 0.25 || bt.Weights[i] != 1 {
				t.Fatalf("all priorities 0: probability %v, weight %v; want 0.25 and 1", bt.Probabilities[i], bt.Weights[i])
			}
		}
	}
	for _, k := range keys {
		if seen[k] < 150 || seen[k] > 250 {
			t.Fatalf("all priorities 0: draws per item %v, want about 200 each", seen)
		}
	}
	if err := tbl.UpdatePriorities([]uint64{keys[2]}, []float64{1}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.SampleInto(context.Background(), bt, 8); err != nil {
		t.Fatal(err)
	}
	for _, k := range bt.Keys {
		if k != keys[2] {
			t.Fatalf("drew key %d of priority 0 while key %d has priority 1", k, keys[2])
		}
	}
}
