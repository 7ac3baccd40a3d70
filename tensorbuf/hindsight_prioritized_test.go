package tensorbuf_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

func TestHindsightPrioritized(t *testing.T) {
	ctx := context.Background()
	b, w := newGoalBuffer(t, nil, 16, lineSteps)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Beta: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd)
	cfg.Table, cfg.Priority = tbl, 2
	hs, err := tensorbuf.NewHindsight(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hs.Generate(); n != 5 || err != nil {
		t.Fatalf("Generate = %d, %v", n, err)
	}
	if tbl.Size() != 10 {
		t.Fatalf("table holds %d items, want 5 real and 5 relabeled", tbl.Size())
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleTable(ctx, ht, 200); err != nil {
		t.Fatal(err)
	}
	// Every item entered with priority 2: uniform, weights 1.
	keyOf := map[string]uint64{}
	for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		if ht.Probabilities[i] != 0.1 || ht.Weights[i] != 1 {
			t.Fatalf("sample %d: probability %v weight %v", i, ht.Probabilities[i], ht.Weights[i])
		}
		want := realLine(x.step)
		if x.relabeled {
			final := 12.0 // episode 2's final position
			if x.step < 3 {
				final = 3 // episode 1's
			}
			want = relabeledLine(x.step, final)
		}
		if x != want {
			t.Fatalf("sample %d: %+v, want %+v", i, x, want)
		}
		keyOf[fmt.Sprint(x.step, x.relabeled)] = ht.Keys[i]
	}
	if len(keyOf) != 10 {
		t.Fatalf("200 uniform samples of 10 items reached %d of them", len(keyOf))
	}
	// Only relabeled step 2 (priority 3) and real step 0 (priority 1).
	var keys []uint64
	var prios []float64
	for name, k := range keyOf {
		p := 0.0
		switch name {
		case "2 true":
			p = 3
		case "0 false":
			p = 1
		}
		keys, prios = append(keys, k), append(prios, p)
	}
	if err := tbl.UpdatePriorities(keys, prios); err != nil {
		t.Fatal(err)
	}
	if err := hs.SampleTable(ctx, ht, 400); err != nil {
		t.Fatal(err)
	}
	n2 := 0
	for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		switch {
		case x.step == 2 && x.relabeled:
			n2++
			if x != relabeledLine(2, 3) || ht.Probabilities[i] != 0.75 || ht.Keys[i] != keyOf["2 true"] {
				t.Fatalf("sample %d: %+v p %v", i, x, ht.Probabilities[i])
			}
			// w = (p/pmin)^-beta = (0.75/0.25)^-1.
			if math.Abs(ht.Weights[i]-1.0/3) > 1e-15 {
				t.Fatalf("weight %v, want 1/3", ht.Weights[i])
			}
		case x.step == 0 && !x.relabeled:
			if x != realLine(0) || ht.Probabilities[i] != 0.25 || ht.Weights[i] != 1 {
				t.Fatalf("sample %d: %+v p %v w %v", i, x, ht.Probabilities[i], ht.Weights[i])
			}
		default:
			t.Fatalf("sampled a zero-priority item: %+v", x)
		}
	}
	// 400 draws at 0.75: sd 0.022.
	if f := float64(n2) / 400; math.Abs(f-0.75) > 0.1 {
		t.Fatalf("relabeled step 2 drawn %.3f of the time, want 0.75", f)
	}
	// The ring overwriting step 0 evicts its real and relabeled items.
	for pos := int64(9); pos < 17; pos++ {
		addGoalStep(t, w, pos, goalStep{tensorbuf.Mid, tensorbuf.Mid, float32(pos), 30, -1, 1})
	}
	if tbl.Size() != 8 || hs.Stored() != 4 {
		t.Fatalf("after overwriting step 0: table %d items, %d stored; want 8, 4", tbl.Size(), hs.Stored())
	}
}
