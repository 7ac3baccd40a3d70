package tensorbuf_test

import (
	"context"
	"maps"
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
	bt, seq, tr, ns := new(tensorbuf.Batch), new(tensorbuf.Batch), new(tensorbuf.Transitions), new(tensorbuf.Transitions)
	nstep := tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.9}
	ttr := new(tensorbuf.TableTransitions)
	var mw []float32
	calls := map[string]func() error{
		"table SampleInto":      func() error { return tbl.SampleInto(ctx, bt, 32) },
		"SampleSequencesInto":   func() error { return b.SampleSequencesInto(seq, 32, 4, tensorbuf.SequenceOptions{EpisodeAware: true}) },
		"SampleTransitionsInto": func() error { return b.SampleTransitionsInto(tr, 32) },
		"SampleNStepInto":       func() error { return b.SampleNStepInto(ns, 32, nstep) },
		"UpdatePriorities":      func() error { return tbl.UpdatePriorities(bt.Keys, bt.Weights) },
		"table SampleTransitionsInto": func() error {
			if err := tbl.SampleTransitionsInto(ctx, ttr, 32, nstep); err != nil {
				return err
			}
			mw = ttr.MaskedWeights32(mw)
			return nil
		},
	}
	maps.Copy(calls, hindsightReuseCalls(t))
	for name, f := range calls {
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

// hindsightReuseCalls returns the reuse paths of hindsight relabeling, each
// over a line-walker buffer of its own: sampling stored relabeled
// experiences uniformly and from a prioritized table (which copied every
// relabeled item it drew onto the heap), relabeling at sample time (which
// allocated a backend scratch arena per call), and n-step relabeled
// samples (three slices per call).
func hindsightReuseCalls(t *testing.T) map[string]func() error {
	ctx := context.Background()
	newHS := func(s tensorbuf.GoalStrategy, mode tensorbuf.RelabelMode, table bool, nstep int) *tensorbuf.Hindsight {
		b, _ := newGoalBuffer(t, nil, 16, lineSteps)
		cfg := lineConfig(s, 2, mode)
		cfg.NStep = tensorbuf.NStepOptions{Horizon: nstep, DiscountFactor: 0.5}
		if table {
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Beta: 0.5, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Table = tbl
		}
		hs, err := tensorbuf.NewHindsight(b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if mode == tensorbuf.RelabelAtEpisodeEnd {
			if n, err := hs.Generate(); n == 0 || err != nil {
				t.Fatalf("Generate = %d, %v", n, err)
			}
		}
		return hs
	}
	end := newHS(tensorbuf.GoalFuture, tensorbuf.RelabelAtEpisodeEnd, false, 0)
	per := newHS(tensorbuf.GoalFuture, tensorbuf.RelabelAtEpisodeEnd, true, 0)
	perN := newHS(tensorbuf.GoalFuture, tensorbuf.RelabelAtEpisodeEnd, true, 3)
	atSample := newHS(tensorbuf.GoalFuture, tensorbuf.RelabelAtSample, false, 0)
	atSampleN := newHS(tensorbuf.GoalEpisode, tensorbuf.RelabelAtSample, false, 3)
	h := make([]*tensorbuf.HindsightTransitions, 5)
	for i := range h {
		h[i] = new(tensorbuf.HindsightTransitions)
	}
	return map[string]func() error{
		"Hindsight.SampleInto at episode end":        func() error { return end.SampleInto(h[0], 32) },
		"Hindsight.SampleTable":                      func() error { return per.SampleTable(ctx, h[1], 32) },
		"Hindsight.SampleTable n-step":               func() error { return perN.SampleTable(ctx, h[2], 32) },
		"Hindsight.SampleInto at sample time":        func() error { return atSample.SampleInto(h[3], 32) },
		"Hindsight.SampleInto at sample time n-step": func() error { return atSampleN.SampleInto(h[4], 32) },
	}
}
