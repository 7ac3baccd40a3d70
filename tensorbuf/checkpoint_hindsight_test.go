package tensorbuf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// hsBehaviour draws from a relabeler what a learner would next: table
// samples, uniform samples, then (after the episode running at the save
// ends) a Generate and more samples, and the export.
func hsBehaviour(t *testing.T, b *tensorbuf.Buffer, w *tensorbuf.Writer, hs *tensorbuf.Hindsight) string {
	t.Helper()
	ctx := context.Background()
	var out bytes.Buffer
	draw := func() {
		ht := new(tensorbuf.HindsightTransitions)
		if err := hs.SampleTable(ctx, ht, 12); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "table %v keys %v p %v\n", readHindsight(t, &ht.Transitions, ht.Relabeled), ht.Keys, ht.Probabilities)
		if err := hs.SampleInto(ht, 12); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "uniform %v\n", readHindsight(t, &ht.Transitions, ht.Relabeled))
	}
	draw()
	// Episode 3 ends: steps 9 (Last) and its boundary.
	addGoalStep(t, w, 9, goalStep{tensorbuf.Mid, tensorbuf.Last, 22, 30, -1, 1})
	addGoalStep(t, w, 10, goalStep{tensorbuf.Last, tensorbuf.First, 23, 30, 0, 1})
	n, err := hs.Generate()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "generated %d stored %d\n", n, hs.Stored())
	draw()
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range exp {
		fmt.Fprintf(&out, "export %v\n", readHindsight(t, tr, rel))
		_ = tr.Release()
	}
	return out.String()
}

// TestHindsightSaveLoad saves a buffer and its relabeler (future goals,
// a prioritized table, random state advanced by samples), restores both,
// and checks that the restored pair samples, generates and exports
// exactly what the original does; and that a relabeler made with
// NewHindsight on the restored table, which does not know its relabeled
// items, is refused.
func TestHindsightSaveLoad(t *testing.T) {
	ctx := context.Background()
	b, w := newGoalBuffer(t, nil, 16, lineSteps)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Beta: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lineConfig(tensorbuf.GoalFuture, 2, tensorbuf.RelabelAtEpisodeEnd)
	cfg.Table = tbl
	hs, err := tensorbuf.NewHindsight(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Generate(); err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleTable(ctx, ht, 5); err != nil { // advance the random sources
		t.Fatal(err)
	}
	var bufCkpt, hsCkpt bytes.Buffer
	if err := b.Save(&bufCkpt, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := hs.Save(&hsCkpt); err != nil {
		t.Fatal(err)
	}
	lb, err := tensorbuf.Load(&bufCkpt, tensorbuf.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	ltbl, err := lb.Table("per")
	if err != nil {
		t.Fatal(err)
	}
	lcfg := cfg
	lcfg.Table = ltbl
	if _, err := tensorbuf.NewHindsight(lb, lcfg); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("NewHindsight on a table with relabeled items: %v, want ErrConfig", err)
	}
	lhs, err := tensorbuf.LoadHindsight(bytes.NewReader(hsCkpt.Bytes()), lb, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := lb.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	want, got := hsBehaviour(t, b, w, hs), hsBehaviour(t, lb, lw, lhs)
	if got != want {
		t.Fatalf("restored relabeler differs:\n got  %s\n want %s", got, want)
	}
	// A corrupted byte anywhere is refused.
	raw := hsCkpt.Bytes()
	for _, i := range []int{3, 30, len(raw) / 2, len(raw) - 2} {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x10
		if _, err := tensorbuf.LoadHindsight(bytes.NewReader(bad), lb, lcfg); !errors.Is(err, tensorbuf.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}
