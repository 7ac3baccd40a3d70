package tensorbuf_test

import (
	"context"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestSteadyStateAllocatesNothing checks that adding a step and the
// reuse paths of every sampler allocate nothing once warmed up.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in the full run")
	}
	b := newBuffer(t, 4, 64)
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	step := makeStep(t, []int{0, 1, 2, 3}, []int64{0, 0, 0, 0}, mids(4, 0))
	for range 100 {
		if err := w.Add(step); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, Beta: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		for s := range int64(60) {
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: 40 + s%20, Len: 4, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	bt, seq, tr := new(tensorbuf.Batch), new(tensorbuf.Batch), new(tensorbuf.Transitions)
	for name, f := range map[string]func() error{
		"table SampleInto":      func() error { return tbl.SampleInto(ctx, bt, 32) },
		"SampleSequencesInto":   func() error { return b.SampleSequencesInto(seq, 32, 4, tensorbuf.SequenceOptions{EpisodeAware: true}) },
		"SampleTransitionsInto": func() error { return b.SampleTransitionsInto(tr, 32) },
		"UpdatePriorities":      func() error { return tbl.UpdatePriorities(bt.Keys, bt.Weights) },
	} {
		if err := f(); err != nil { // warm up: first call sizes the memory
			t.Fatalf("%s: %v", name, err)
		}
		if n := testing.AllocsPerRun(50, func() {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
	if n := testing.AllocsPerRun(50, func() { _ = w.Add(step) }); n != 0 {
		t.Errorf("Add: %v allocations per call", n)
	}
}
