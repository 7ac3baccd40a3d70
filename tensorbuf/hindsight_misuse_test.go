package tensorbuf_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestHindsightMaxNumGoalsAccepted checks the bound on NumGoals is
// inclusive, and that Generate at that bound stays bounded: k relabeled
// experiences per transition.
func TestHindsightMaxNumGoalsAccepted(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 16, lineSteps)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFuture, tensorbuf.MaxNumGoals, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	// lineSteps holds two completed episodes of 3 + 2 transitions.
	if n, err := hs.Generate(); n != 5*tensorbuf.MaxNumGoals || err != nil {
		t.Fatalf("Generate = %d, %v; want %d", n, err, 5*tensorbuf.MaxNumGoals)
	}
}

// TestHindsightNilContext checks that SampleTable refuses a nil context
// with ErrInvalidArg (it panicked) and consumes nothing.
func TestHindsightNilContext(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 16, lineSteps)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, MaxTimesSampled: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd)
	cfg.Table = tbl
	hs, err := tensorbuf.NewHindsight(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Generate(); err != nil {
		t.Fatal(err)
	}
	size := tbl.Size()
	ht := new(tensorbuf.HindsightTransitions)
	var nilCtx context.Context // the misuse under test
	if err := hs.SampleTable(nilCtx, ht, 2); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("SampleTable(nil ctx) = %v, want ErrInvalidArg", err)
	}
	if tbl.Size() != size || ht.Rows != nil {
		t.Fatalf("refused sample changed state: table size %d (was %d), rows %v", tbl.Size(), size, ht.Rows)
	}
	if err := hs.SampleTable(context.Background(), ht, 2); err != nil {
		t.Fatal(err)
	}
	if tbl.Size() != size-2 {
		t.Fatalf("after a sample of 2 the table holds %d items, want %d", tbl.Size(), size-2)
	}
}

// TestNewHindsightClosedBuffer checks that NewHindsight refuses a closed
// buffer with ErrClosed, as NewWriter and NewTable do (it succeeded).
func TestNewHindsightClosedBuffer(t *testing.T) {
	for _, mode := range []tensorbuf.RelabelMode{tensorbuf.RelabelAtEpisodeEnd, tensorbuf.RelabelAtSample} {
		b, _ := newGoalBuffer(t, nil, 16, lineSteps)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.NewWriter(); !errors.Is(err, tensorbuf.ErrClosed) {
			t.Fatalf("NewWriter on a closed buffer: %v", err)
		}
		hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFuture, 4, mode))
		if !errors.Is(err, tensorbuf.ErrClosed) || hs != nil {
			t.Fatalf("NewHindsight(%v) on a closed buffer = %v, %v; want nil, ErrClosed", mode, hs, err)
		}
	}
}
