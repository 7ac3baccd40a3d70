package tensorbuf_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestTableSamplesRespectTheSampleLimit: table samples and table
// transitions are held to the same sample limit as the direct samplers
// (SampleBudget), refused before anything is allocated or consumed:
// 2^22 draws of one item from a small buffer (64 MiB budget) would take
// hundreds of MiB.
func TestTableSamplesRespectTheSampleLimit(t *testing.T) {
	ctx := context.Background()
	b := newBuffer(t, 1, 8)
	fill(t, b, newModel(1, 8), [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2)})
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", MaxTimesSampled: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2}); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 22
	for name, sample := range map[string]func() error{
		"Sample": func() error { _, err := tbl.Sample(ctx, n); return err },
		"SampleTransitions": func() error {
			_, err := tbl.SampleTransitions(ctx, n, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1})
			return err
		},
	} {
		if err := sample(); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Fatalf("%s of %d: %v, want ErrInvalidArg", name, n, err)
		}
	}
	// Nothing consumed: the one item can still be sampled 2^30 times, and
	// is still there.
	if !tbl.CanSample(1<<30) || tbl.Size() != 1 {
		t.Fatalf("a refused sample consumed: size %d, can sample 2^30: %v", tbl.Size(), tbl.CanSample(1<<30))
	}
	if _, err := tbl.Sample(ctx, 4); err != nil {
		t.Fatal(err)
	}
}
