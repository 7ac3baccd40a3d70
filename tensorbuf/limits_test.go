package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// TestOversizedSamplesRefused checks that samples whose sizes overflow or
// exceed the sample limit fail at once with ErrInvalidArg (before the
// limit, n*l overflowed and the process allocated until it died) and
// leave the caller's result, and the hindsight table, as they were.
func TestOversizedSamplesRefused(t *testing.T) {
	ctx := context.Background()
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
	if got := b.SampleBudget(); got != tensorbuf.MinSampleBudget {
		t.Fatalf("SampleBudget of a small buffer = %d, want the floor %d", got, tensorbuf.MinSampleBudget)
	}
	budget := int(b.SampleBudget())
	opt := tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.9}
	far := tensorbuf.NStepOptions{Horizon: 1 << 40, DiscountFactor: 0.9}
	seq, tr := new(tensorbuf.Batch), new(tensorbuf.Transitions)
	if err := b.SampleSequencesInto(seq, 8, 4, tensorbuf.SequenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.SampleNStepInto(tr, 8, opt); err != nil {
		t.Fatal(err)
	}
	seqItems, seqObs := slices.Clone(seq.Items), seq.Fields["obs"]
	trRows, trSteps, trRew := slices.Clone(tr.Rows), slices.Clone(tr.Steps), tr.Reward

	hb, _ := newGoalBuffer(t, nil, 16, lineSteps)
	tbl, err := hb.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Beta: 0.5, MaxTimesSampled: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lineConfig(tensorbuf.GoalFuture, 4, tensorbuf.RelabelAtEpisodeEnd)
	cfg.Table = tbl
	hs, err := tensorbuf.NewHindsight(hb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Generate(); err != nil {
		t.Fatal(err)
	}
	atSample, err := tensorbuf.NewHindsight(hb, lineConfig(tensorbuf.GoalFuture, 4, tensorbuf.RelabelAtSample))
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleInto(ht, 8); err != nil {
		t.Fatal(err)
	}
	htRows, htRew := slices.Clone(ht.Rows), ht.Reward
	size := tbl.Size()

	for _, tc := range []struct {
		name string
		call func() error
		want error
		msg  string // a part of the error that names the limit hit
	}{
		{"SampleSequences MaxInt/2 x 4", func() error {
			return b.SampleSequencesInto(seq, math.MaxInt/2, 4, tensorbuf.SequenceOptions{})
		}, tensorbuf.ErrInvalidArg, ""},
		{"SampleSequences MaxInt x 2", func() error {
			return b.SampleSequencesInto(seq, math.MaxInt, 2, tensorbuf.SequenceOptions{EpisodeAware: true})
		}, tensorbuf.ErrInvalidArg, ""},
		{"SampleSequences 2^31 x 1", func() error { return b.SampleSequencesInto(seq, 1<<31, 1, tensorbuf.SequenceOptions{}) }, tensorbuf.ErrInvalidArg, ""},
		{"SampleSequences over the budget", func() error {
			return b.SampleSequencesInto(seq, budget/4, 4, tensorbuf.SequenceOptions{})
		}, tensorbuf.ErrInvalidArg, ""},
		{"SampleSequences 4 x MaxInt", func() error { return b.SampleSequencesInto(seq, 4, math.MaxInt, tensorbuf.SequenceOptions{}) }, tensorbuf.ErrSequenceLen, ""},
		{"SampleTransitions MaxInt", func() error { return b.SampleTransitionsInto(tr, math.MaxInt) }, tensorbuf.ErrInvalidArg, ""},
		{"SampleTransitions over the budget", func() error { return b.SampleTransitionsInto(tr, budget) }, tensorbuf.ErrInvalidArg, "exceeds the sample limit"},
		{"SampleNStep MaxInt", func() error { return b.SampleNStepInto(tr, math.MaxInt, opt) }, tensorbuf.ErrInvalidArg, ""},
		{"SampleNStep over the budget", func() error { return b.SampleNStepInto(tr, budget, opt) }, tensorbuf.ErrInvalidArg, ""},
		// 300,000 transitions fit the budget; 300,000 look-aheads of up
		// to 64 steps (the capacity) of 4 bytes do not.
		{"SampleNStep look-ahead over the budget", func() error { return b.SampleNStepInto(tr, 300_000, far) }, tensorbuf.ErrInvalidArg, "look-ahead of 300000 x 64 steps"},
		{"Hindsight.SampleInto MaxInt", func() error { return hs.SampleInto(ht, math.MaxInt) }, tensorbuf.ErrInvalidArg, ""},
		{"Hindsight.SampleInto over the budget", func() error { return hs.SampleInto(ht, budget) }, tensorbuf.ErrInvalidArg, ""},
		{"Hindsight.SampleInto at sample time MaxInt/2", func() error { return atSample.SampleInto(ht, math.MaxInt/2) }, tensorbuf.ErrInvalidArg, ""},
		{"Hindsight.SampleTable MaxInt/2", func() error { return hs.SampleTable(ctx, ht, math.MaxInt/2) }, tensorbuf.ErrInvalidArg, ""},
		{"Hindsight.SampleTable over the budget", func() error { return hs.SampleTable(ctx, ht, budget) }, tensorbuf.ErrInvalidArg, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want it to say %q", err, tc.msg)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusing took %v", d)
			}
		})
	}
	if !slices.Equal(seq.Items, seqItems) || seq.Fields["obs"] != seqObs {
		t.Error("a refused sequence sample changed the batch")
	}
	if !slices.Equal(tr.Rows, trRows) || !slices.Equal(tr.Steps, trSteps) || tr.Reward != trRew {
		t.Error("a refused n-step sample changed the transitions")
	}
	if !slices.Equal(ht.Rows, htRows) || ht.Reward != htRew {
		t.Error("a refused hindsight sample changed the transitions")
	}
	if got := tbl.Size(); got != size {
		t.Errorf("refused table samples consumed items: size %d, want %d", got, size)
	}
}

func TestHugeOrOverflowingInputs(t *testing.T) {
	for _, cfg := range []tensorbuf.Config{
		{NumEnvs: 3, Capacity: 1 << 62, Fields: testFields},
		{NumEnvs: 4, Capacity: 1 << 62, Fields: testFields},
		{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{Name: "x", Shape: []int{1 << 40, 1 << 40}}}},
	} {
		if _, err := tensorbuf.New(cfg); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("New(%d x %d): %v, want ErrConfig", cfg.NumEnvs, cfg.Capacity, err)
		}
	}
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t"}, 1)
	if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: math.MaxInt64, Len: 2}); !errors.Is(err, tensorbuf.ErrItem) {
		t.Fatalf("item starting at MaxInt64: %v", err)
	}
	b := newBuffer(t, 1, 4)
	if _, err := b.SampleSequences(math.MaxInt32, 4, tensorbuf.SequenceOptions{}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("2^31 windows of 4: %v", err)
	}
}
