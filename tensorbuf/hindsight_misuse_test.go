package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"slices"
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

func TestHindsightRejectsBadConfig(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 8, lineSteps[:4])
	other, _ := newGoalBuffer(t, nil, 8, nil)
	otherTable, err := other.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	limited, err := b.NewTable(tensorbuf.TableConfig{Name: "limited", RateLimiter: &tensorbuf.RateLimiter{SamplesPerInsert: 1, ErrorBuffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := b.NewTable(tensorbuf.TableConfig{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	good := lineConfig(tensorbuf.GoalFuture, 4, tensorbuf.RelabelAtEpisodeEnd)
	for _, tc := range []struct {
		name   string
		mutate func(c *tensorbuf.HindsightConfig)
		want   error
	}{
		{"unknown achieved field", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Field = "nope" }, tensorbuf.ErrUnknownField},
		{"unknown desired field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = "nope" }, tensorbuf.ErrUnknownField},
		{"built-in field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = tensorbuf.RewardName }, tensorbuf.ErrUnknownField},
		{"action field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = "act" }, tensorbuf.ErrConfig},
		{"index past end", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{3} }, tensorbuf.ErrConfig},
		{"negative index", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Indices = []int{-1} }, tensorbuf.ErrConfig},
		{"no indices", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Indices = nil }, tensorbuf.ErrConfig},
		{"repeated index", func(c *tensorbuf.HindsightConfig) {
			c.AchievedGoal.Indices = []int{0, 0}
			c.DesiredGoal.Indices = []int{1, 2}
		}, tensorbuf.ErrConfig},
		{"sizes differ", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{1, 2} }, tensorbuf.ErrConfig},
		{"shared element", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{0} }, tensorbuf.ErrConfig},
		{"no reward", func(c *tensorbuf.HindsightConfig) { c.Reward = nil }, tensorbuf.ErrConfig},
		{"no is-done", func(c *tensorbuf.HindsightConfig) { c.IsDone = nil }, tensorbuf.ErrConfig},
		{"k 0", func(c *tensorbuf.HindsightConfig) { c.NumGoals = 0 }, tensorbuf.ErrConfig},
		{"k 1<<40", func(c *tensorbuf.HindsightConfig) { c.NumGoals = 1 << 40 }, tensorbuf.ErrConfig},
		{"k above MaxNumGoals", func(c *tensorbuf.HindsightConfig) { c.NumGoals = tensorbuf.MaxNumGoals + 1 }, tensorbuf.ErrConfig},
		{"k 1<<40 at sample time", func(c *tensorbuf.HindsightConfig) { c.NumGoals, c.Mode = 1<<40, tensorbuf.RelabelAtSample }, tensorbuf.ErrConfig},
		{"strategy", func(c *tensorbuf.HindsightConfig) { c.Strategy = 9 }, tensorbuf.ErrConfig},
		{"mode", func(c *tensorbuf.HindsightConfig) { c.Mode = 5 }, tensorbuf.ErrConfig},
		{"priority", func(c *tensorbuf.HindsightConfig) { c.Priority = math.Inf(1) }, tensorbuf.ErrConfig},
		{"foreign table", func(c *tensorbuf.HindsightConfig) { c.Table = otherTable }, tensorbuf.ErrConfig},
		{"rate-limited table", func(c *tensorbuf.HindsightConfig) { c.Table = limited }, tensorbuf.ErrConfig},
		{"table at sample time", func(c *tensorbuf.HindsightConfig) { c.Table, c.Mode = plain, tensorbuf.RelabelAtSample }, tensorbuf.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			cfg.AchievedGoal.Indices = slices.Clone(good.AchievedGoal.Indices)
			cfg.DesiredGoal.Indices = slices.Clone(good.DesiredGoal.Indices)
			tc.mutate(&cfg)
			if _, err := tensorbuf.NewHindsight(b, cfg); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	hs, err := tensorbuf.NewHindsight(b, good)
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleInto(ht, 0); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("sample of 0: %v", err)
	}
	if err := hs.SampleTable(context.Background(), ht, 1); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("SampleTable without a table: %v", err)
	}
	if _, _, err := hs.AllExperiences(7); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("export mode: %v", err)
	}
	if _, err := tensorbuf.NewHindsight(nil, good); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("nil buffer: %v", err)
	}
}

// TestHindsightCutEpisode stores an episode cut short by a reset (a First
// step with no boundary step before it, as a driver run restarted without
// its time step leaves): it is never complete, so Generate relabels only
// the next episode, and sample-time goals never come from the other side
// of the cut.
