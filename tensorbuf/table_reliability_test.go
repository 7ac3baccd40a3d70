package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// TestInsertLengthOverflowRefused: Len+Pad is never summed where it could
// overflow, so an item of Pad math.MaxInt is refused, changes nothing, and
// the table still samples and dumps its items.
func TestInsertLengthOverflowRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   tensorbuf.Item
		want error
	}{
		{"pad maxint", tensorbuf.Item{Row: 0, Start: 0, Len: 1, Pad: math.MaxInt}, tensorbuf.ErrSequenceLen},
		{"pad maxint-1 len 2", tensorbuf.Item{Row: 0, Start: 0, Len: 2, Pad: math.MaxInt - 1}, tensorbuf.ErrSequenceLen},
		{"len maxint", tensorbuf.Item{Row: 0, Start: 0, Len: math.MaxInt}, tensorbuf.ErrSequenceLen},
		{"len and pad maxint", tensorbuf.Item{Row: 0, Start: 0, Len: math.MaxInt, Pad: math.MaxInt}, tensorbuf.ErrSequenceLen},
		{"one over capacity", tensorbuf.Item{Row: 0, Start: 0, Len: 1, Pad: 8}, tensorbuf.ErrSequenceLen},
		{"negative pad", tensorbuf.Item{Row: 0, Start: 0, Len: 1, Pad: math.MinInt}, tensorbuf.ErrInvalidArg},
		{"start minint", tensorbuf.Item{Row: 0, Start: math.MinInt64, Len: 1}, tensorbuf.ErrItem},
		{"start maxint", tensorbuf.Item{Row: 0, Start: math.MaxInt64, Len: 1}, tensorbuf.ErrItem},
		{"fits", tensorbuf.Item{Row: 0, Start: 0, Len: 1, Pad: 7}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.FIFO, MaxTimesSampled: 1}, 1)
			_, err := tbl.Insert(tc.it)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Insert(%+v) = %v, want %v", tc.it, err, tc.want)
			}
			size := 1
			if tc.want == nil {
				size = 2
			}
			if got := tbl.Size(); got != size {
				t.Fatalf("size %d after the insert, want %d", got, size)
			}
			all, err := tbl.All()
			if err != nil {
				t.Fatalf("All: %v", err)
			}
			_ = all.Release()
			bt, err := tbl.Sample(context.Background(), size)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			wantL := 1 // the item of tableWith: 1 step
			if size == 2 {
				wantL = 8 // and the accepted one: 1+7 steps
			}
			if n, l := bt.Len(); n != size || l != wantL {
				t.Fatalf("batch %dx%d, want %dx%d", n, l, size, wantL)
			}
			_ = bt.Release()
			if got := tbl.Size(); got != 0 {
				t.Fatalf("size %d after sampling every item once, want 0", got)
			}
		})
	}
}

// TestRateLimiterValidation: NewTable refuses, as Reverb does, a limiter
// under which samplers or inserters could stop for good, and a MinSize
// the table can never reach.
func TestRateLimiterValidation(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name    string
		rl      tensorbuf.RateLimiter
		maxSize int
		ok      bool
	}{
		{"spi 0.25 eb 0.25", tensorbuf.RateLimiter{SamplesPerInsert: 0.25, ErrorBuffer: 0.25}, 0, false},
		{"min 1 spi 0.2 eb 0.55", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 0.2, ErrorBuffer: 0.55}, 0, false},
		{"nan spi", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: nan, ErrorBuffer: 1}, 0, false},
		{"nan eb", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: nan}, 0, false},
		{"nan eb without ratio", tensorbuf.RateLimiter{MinSize: 1, ErrorBuffer: nan}, 0, false},
		{"inf spi", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: inf, ErrorBuffer: inf}, 0, false},
		{"inf eb", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: inf}, 0, false},
		{"spi 2^54", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1 << 54, ErrorBuffer: 1 << 54}, 0, false},
		{"eb below spi", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 2, ErrorBuffer: 1.5}, 0, false},
		{"negative spi", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: -1, ErrorBuffer: 1}, 0, false},
		{"negative min size", tensorbuf.RateLimiter{MinSize: -1}, 0, false},
		{"min size over max size", tensorbuf.RateLimiter{MinSize: 5}, 4, false},
		{"min size over the ring's steps", tensorbuf.RateLimiter{MinSize: 17}, 0, false},
		{"spi 0.2 eb 1", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 0.2, ErrorBuffer: 1}, 0, true},
		{"spi 2 eb 2", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 2, ErrorBuffer: 2}, 0, true},
		{"no ratio", tensorbuf.RateLimiter{MinSize: 3}, 0, true},
		{"spi 2^53", tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1 << 53, ErrorBuffer: 1 << 53}, 0, true},
		{"min size at max size", tensorbuf.RateLimiter{MinSize: 4}, 4, true},
		{"min size at the ring's steps", tensorbuf.RateLimiter{MinSize: 16}, 0, true},
		{"min size over the ring, max size set", tensorbuf.RateLimiter{MinSize: 17}, 32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuffer(t, 2, 8) // 16 steps
			rl := tc.rl
			_, err := b.NewTable(tensorbuf.TableConfig{Name: "t", MaxSize: tc.maxSize, RateLimiter: &rl})
			if tc.ok && err != nil {
				t.Fatalf("NewTable: %v", err)
			}
			if !tc.ok && !errors.Is(err, tensorbuf.ErrConfig) {
				t.Fatalf("NewTable = %v, want ErrConfig", err)
			}
		})
	}
}

// TestRateLimiterAlwaysProgresses alternates inserters and samplers under
// limiters at the edge of what NewTable accepts: whenever an insert is
// refused, a sample of one must go through, and the other way round.
func TestRateLimiterAlwaysProgresses(t *testing.T) {
	for _, rl := range []tensorbuf.RateLimiter{
		{MinSize: 1, SamplesPerInsert: 0.2, ErrorBuffer: 1},
		{MinSize: 3, SamplesPerInsert: 0.25, ErrorBuffer: 1},
		{MinSize: 2, SamplesPerInsert: 3, ErrorBuffer: 3},
		{MinSize: 1, SamplesPerInsert: 1.5, ErrorBuffer: 1.5},
	} {
		rl.Timeout = time.Millisecond
		_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: &rl})
		ctx := context.Background()
		insert := func() error { _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 1}); return err }
		sample := func() error {
			bt, err := tbl.Sample(ctx, 1)
			if err == nil {
				_ = bt.Release()
			}
			return err
		}
		inserts, samples := 0, 0
		for i := range 60 {
			first, second := insert, sample
			if i%2 == 1 {
				first, second = sample, insert
			}
			err1, err2 := first(), second()
			for _, err := range []error{err1, err2} {
				if err != nil && !errors.Is(err, tensorbuf.ErrRateLimited) {
					t.Fatalf("%+v: op %d: %v", rl, i, err)
				}
			}
			if err1 != nil && err2 != nil {
				t.Fatalf("%+v: step %d: both sides blocked after %d inserts, %d samples", rl, i, inserts, samples)
			}
			if i%2 == 0 {
				inserts, samples = inserts+btoi(err1 == nil), samples+btoi(err2 == nil)
			} else {
				samples, inserts = samples+btoi(err1 == nil), inserts+btoi(err2 == nil)
			}
		}
		if samples == 0 || inserts == 0 {
			t.Fatalf("%+v: %d inserts, %d samples", rl, inserts, samples)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestMinSizeAtRingBoundIsReachable: a MinSize equal to the ring's steps
// (the bound NewTable enforces without MaxSize) is reached by one item
// per stored step.
func TestMinSizeAtRingBoundIsReachable(t *testing.T) {
	b := newBuffer(t, 2, 4)
	m := newModel(2, 4)
	fill(t, b, m, [][]rawStep{mids(2, 0), mids(2, 1), mids(2, 2), mids(2, 3)})
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", RateLimiter: &tensorbuf.RateLimiter{MinSize: 8, Timeout: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		for s := range int64(4) {
			if _, err := tbl.Sample(context.Background(), 1); !errors.Is(err, tensorbuf.ErrRateLimited) {
				t.Fatalf("sample below MinSize: %v", err)
			}
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bt, err := tbl.Sample(context.Background(), 1)
	if err != nil {
		t.Fatalf("sample at MinSize: %v", err)
	}
	_ = bt.Release()
}

// TestNonFiniteTableSettingsRefused: exponents must be finite.
func TestNonFiniteTableSettingsRefused(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	b := newBuffer(t, 1, 4)
	for _, cfg := range []tensorbuf.TableConfig{
		{Name: "a", Selector: tensorbuf.Prioritized, PriorityExponent: inf},
		{Name: "b", Selector: tensorbuf.Prioritized, PriorityExponent: nan},
		{Name: "c", Selector: tensorbuf.Prioritized, PriorityExponent: -1},
		{Name: "d", Selector: tensorbuf.Prioritized, Beta: inf},
		{Name: "e", Selector: tensorbuf.Prioritized, Beta: nan},
		{Name: "f", Selector: tensorbuf.Prioritized, Beta: -inf},
	} {
		if _, err := b.NewTable(cfg); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("NewTable(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, Beta: 1}, 1, 4)
	for _, beta := range []float64{inf, nan, -1, -inf} {
		if err := tbl.SetBeta(beta); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Errorf("SetBeta(%v) = %v, want ErrInvalidArg", beta, err)
		}
	}
	// Beta is still 1: the priority-4 item weighs (4/1)^-1.
	for range 20 {
		bt, err := tbl.Sample(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		want := 1.0
		if bt.Items[0].Priority == 4 {
			want = 0.25
		}
		if bt.Weights[0] != want {
			t.Fatalf("weight of priority %v = %v, want %v", bt.Items[0].Priority, bt.Weights[0], want)
		}
		_ = bt.Release()
	}
}

// TestPrioritySumOverflowRefused: a priority that would make the sum tree
// total non-finite is refused, on insert and on update, changing nothing;
// the representable ones keep exact probabilities, and a priority-1 item
// next to a huge one is (almost surely) never drawn.
func TestPrioritySumOverflowRefused(t *testing.T) {
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, Beta: 1})
	insert := func(start int64, p float64) (uint64, error) {
		return tbl.Insert(tensorbuf.Item{Row: 0, Start: start, Len: 1, Priority: p})
	}
	big, err := insert(0, 1e308)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := insert(1, 1e308); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("second 1e308: %v, want ErrInvalidArg", err)
	}
	small, err := insert(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Size() != 2 {
		t.Fatalf("size %d, want 2", tbl.Size())
	}
	if err := tbl.UpdatePriorities([]uint64{small}, []float64{1e308}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("update to 1e308: %v, want ErrInvalidArg", err)
	}
	// A key given twice: its last priority counts, and the total fits.
	if err := tbl.UpdatePriorities([]uint64{big, big}, []float64{0, 1e308}); err != nil {
		t.Fatalf("update of one key twice: %v", err)
	}
	check := func() {
		t.Helper()
		total := 1e308 + 1.0
		bt, err := tbl.Sample(context.Background(), 200)
		if err != nil {
			t.Fatal(err)
		}
		defer bt.Release()
		for i, k := range bt.Keys {
			if k != big {
				t.Fatalf("draw %d: the priority-1 item beside a 1e308 one", i)
			}
			if p := bt.Probabilities[i]; p != 1e308/total {
				t.Fatalf("probability %v, want %v", p, 1e308/total)
			}
			// (p_big/p_min)^-1 = 1e-308, finite.
			if w := bt.Weights[i]; math.Abs(w-1e-308) > 1e-320 {
				t.Fatalf("weight %v, want %v", w, 1/1e308)
			}
		}
		all, err := tbl.All()
		if err != nil {
			t.Fatal(err)
		}
		defer all.Release()
		if all.Items[0].Priority != 1e308 || all.Items[1].Priority != 1 {
			t.Fatalf("priorities %v, %v after refused updates", all.Items[0].Priority, all.Items[1].Priority)
		}
	}
	check()
	if err := tbl.UpdatePriorities([]uint64{small, big}, []float64{1, 1.7e308}); err != nil {
		t.Fatalf("update to 1.7e308: %v", err)
	}
	if err := tbl.UpdatePriorities([]uint64{small, big}, []float64{1e308, 1e308}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("update of both: %v, want ErrInvalidArg", err)
	}
	all, err := tbl.All()
	if err != nil {
		t.Fatal(err)
	}
	if all.Items[0].Priority != 1.7e308 || all.Items[1].Priority != 1 {
		t.Fatalf("priorities %v, %v after a refused update", all.Items[0].Priority, all.Items[1].Priority)
	}
	_ = all.Release()
	if err := tbl.UpdatePriorities([]uint64{big}, []float64{1e308}); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestPriorityExponentOverflowRefused: priority^a must be finite.
func TestPriorityExponentOverflowRefused(t *testing.T) {
	_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, PriorityExponent: 400}, 0.5)
	if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 1, Len: 1, Priority: 10}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("10^400: %v, want ErrInvalidArg", err)
	}
	if err := tbl.UpdatePriorities(keys, []float64{10}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("update to 10^400: %v, want ErrInvalidArg", err)
	}
	bt, err := tbl.Sample(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	if bt.Items[0].Priority != 0.5 || bt.Probabilities[0] != 1 || tbl.Size() != 1 {
		t.Fatalf("item %+v, probability %v, size %d", bt.Items[0], bt.Probabilities[0], tbl.Size())
	}
	// Other selectors do not raise priorities to a power: 10 is fine.
	_, fifo, _ := tableWith(t, tensorbuf.TableConfig{Name: "f", PriorityExponent: 400}, 10)
	if fifo.Size() != 1 {
		t.Fatal("uniform table refused priority 10")
	}
}

// TestImportanceWeightsStayFinite: weights come from the ratio of the
// tree's weights, not of probabilities that underflow to 0 (which left
// every weight at 1): the 1e300 item weighs (1e300/1e-300)^-1, 0 in
// float64, and the 1e-30 one (1e-30/1e-300)^-1 = 1e-270.
func TestImportanceWeightsStayFinite(t *testing.T) {
	_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, Beta: 1}, 1e300, 1e-300, 1e-30)
	if err := tbl.UpdatePriorities(keys[2:], []float64{1e-30}); err != nil {
		t.Fatal(err)
	}
	bt, err := tbl.Sample(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	for i, w := range bt.Weights {
		if bt.Keys[i] != keys[0] || w != 0 {
			t.Fatalf("draw %d: item %+v weighs %v, want the 1e300 item weighing 0", i, bt.Items[i], w)
		}
	}
}

// TestNilContextRefused: ctx-taking table methods refuse a nil context
// with ErrInvalidArg instead of panicking, changing nothing.
func TestNilContextRefused(t *testing.T) {
	var nilCtx context.Context
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", MaxTimesSampled: 1}, 1)
	if _, err := tbl.InsertContext(nilCtx, tensorbuf.Item{Row: 0, Start: 1, Len: 1}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("InsertContext(nil) = %v", err)
	}
	if err := tbl.SampleInto(nilCtx, new(tensorbuf.Batch), 1); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("SampleInto(nil) = %v", err)
	}
	if _, err := tbl.Sample(nilCtx, 1); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("Sample(nil) = %v", err)
	}
	if tbl.Size() != 1 {
		t.Fatalf("size %d, want 1", tbl.Size())
	}
}
