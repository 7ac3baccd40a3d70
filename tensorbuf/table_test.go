package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// tableWith returns a buffer of one row holding 8 steps and a table with
// one single-step item per step, inserted in order with the given
// priorities.
func tableWith(t *testing.T, cfg tensorbuf.TableConfig, prios ...float64) (*tensorbuf.Buffer, *tensorbuf.Table, []uint64) {
	t.Helper()
	b := newBuffer(t, 1, 8)
	m := newModel(1, 8)
	var metas [][]rawStep
	for i := range 8 {
		metas = append(metas, mids(1, float32(i)))
	}
	fill(t, b, m, metas)
	tbl, err := b.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for i, p := range prios {
		k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: int64(i), Len: 1, Priority: p})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return b, tbl, keys
}

func sampleKeys(t *testing.T, tbl *tensorbuf.Table, n int) []uint64 {
	t.Helper()
	bt, err := tbl.Sample(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return bt.Keys
}

func TestSelectorsAndRemovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tensorbuf.TableConfig
		n    int
		want []int // indices of inserted keys
		size int   // table size afterwards
	}{
		{"fifo keeps", tensorbuf.TableConfig{Selector: tensorbuf.FIFO}, 3, []int{0, 0, 0}, 4},
		{"lifo keeps", tensorbuf.TableConfig{Selector: tensorbuf.LIFO}, 3, []int{3, 3, 3}, 4},
		{"fifo queue", tensorbuf.TableConfig{Selector: tensorbuf.FIFO, MaxTimesSampled: 1}, 3, []int{0, 1, 2}, 1},
		{"lifo stack", tensorbuf.TableConfig{Selector: tensorbuf.LIFO, MaxTimesSampled: 1}, 4, []int{3, 2, 1, 0}, 0},
		{"fifo twice each", tensorbuf.TableConfig{Selector: tensorbuf.FIFO, MaxTimesSampled: 2}, 5, []int{0, 0, 1, 1, 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "t"
			_, tbl, keys := tableWith(t, tc.cfg, 1, 1, 1, 1)
			got := sampleKeys(t, tbl, tc.n)
			var want []uint64
			for _, i := range tc.want {
				want = append(want, keys[i])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("keys %v, want %v", got, want)
			}
			if tbl.Size() != tc.size {
				t.Fatalf("size %d, want %d", tbl.Size(), tc.size)
			}
		})
	}
}

func TestMaxTimesSampledExhaustsExactly(t *testing.T) {
	for _, sel := range []tensorbuf.Selector{tensorbuf.Uniform, tensorbuf.Prioritized, tensorbuf.FIFO, tensorbuf.LIFO} {
		t.Run(sel.String(), func(t *testing.T) {
			_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: sel, MaxTimesSampled: 3, Seed: 5}, 1, 2, 3, 4, 5)
			count := map[uint64]int{}
			for range 5 {
				for _, k := range sampleKeys(t, tbl, 3) {
					count[k]++
				}
			}
			if tbl.Size() != 0 {
				t.Fatalf("size %d after 15 samples of 5 items x 3", tbl.Size())
			}
			for _, k := range keys {
				if count[k] != 3 {
					t.Fatalf("key %d sampled %d times, want 3 (%v)", k, count[k], count)
				}
			}
			if _, err := tbl.Sample(context.Background(), 1); !errors.Is(err, tensorbuf.ErrEmpty) {
				t.Fatalf("exhausted table: %v", err)
			}
		})
	}
}

func TestFailedSampleConsumesNothing(t *testing.T) {
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.FIFO, MaxTimesSampled: 1}, 1, 1)
	if _, err := tbl.Sample(context.Background(), 3); !errors.Is(err, tensorbuf.ErrEmpty) {
		t.Fatalf("3 samples of 2 single-use items: %v", err)
	}
	if tbl.Size() != 2 {
		t.Fatalf("failed sample consumed items: size %d", tbl.Size())
	}
}

func TestMaxSizeRemovesOldest(t *testing.T) {
	_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.FIFO, MaxSize: 2}, 1, 1, 1)
	all, err := tbl.All()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all.Keys, keys[1:]) {
		t.Fatalf("keys %v, want %v", all.Keys, keys[1:])
	}
}

// TestPrioritizedFrequencies samples 20,000 items and checks each item's
// count against its probability p^a/sum p^a within 5 binomial standard
// deviations, with a fixed seed.
func TestPrioritizedFrequencies(t *testing.T) {
	prios := []float64{1, 2, 3, 4, 0.5, 0}
	for _, a := range []float64{1, 0.6} {
		_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, PriorityExponent: a, Seed: 11}, prios...)
		var sum float64
		for _, p := range prios {
			sum += math.Pow(p, a)
		}
		count := map[uint64]int{}
		const draws = 20000
		bt := new(tensorbuf.Batch)
		for range draws / 100 {
			if err := tbl.SampleInto(context.Background(), bt, 100); err != nil {
				t.Fatal(err)
			}
			for i, k := range bt.Keys {
				count[k]++
				idx := slices.Index(keys, k)
				if want := math.Pow(prios[idx], a) / sum; math.Abs(bt.Probabilities[i]-want) > 1e-12 {
					t.Fatalf("a=%v: probability of item %d = %v, want %v", a, idx, bt.Probabilities[i], want)
				}
			}
		}
		for i, k := range keys {
			p := math.Pow(prios[i], a) / sum
			mean, sd := draws*p, math.Sqrt(draws*p*(1-p))
			if math.Abs(float64(count[k])-mean) > 5*sd+0.5 {
				t.Errorf("a=%v: item %d (priority %v) drawn %d times, expected %.0f ± %.0f", a, i, prios[i], count[k], mean, 5*sd)
			}
		}
	}
}

func TestImportanceWeightsAndPriorityUpdate(t *testing.T) {
	_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, Beta: 0.5, Seed: 3}, 1, 4)
	bt, err := tbl.Sample(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	// P = 0.2, 0.8; w_i = (N P_i)^-b / max_j (N P_j)^-b = (P_i / P_min)^-b.
	for i, k := range bt.Keys {
		want := map[uint64]float64{keys[0]: 1, keys[1]: math.Pow(4, -0.5)}[k]
		if math.Abs(bt.Weights[i]-want) > 1e-12 {
			t.Fatalf("weight of %d = %v, want %v", k, bt.Weights[i], want)
		}
	}
	if err := tbl.UpdatePriorities([]uint64{keys[0], 999}, []float64{5, 5}); !errors.Is(err, tensorbuf.ErrUnknownKey) {
		t.Fatalf("update with unknown key: %v", err)
	}
	if err := tbl.UpdatePriorities([]uint64{keys[1]}, []float64{0}); err != nil {
		t.Fatal(err)
	}
	// Only keys[0] has weight now: the failed update above changed nothing.
	for _, k := range sampleKeys(t, tbl, 20) {
		if k != keys[0] {
			t.Fatalf("sampled %d with priority 0", k)
		}
	}
}

func TestItemsEvictedWhenFirstStepOverwritten(t *testing.T) {
	b := newBuffer(t, 2, 4)
	m := newModel(2, 4)
	a := fill(t, b, m, [][]rawStep{mids(2, 0), mids(2, 1), mids(2, 2), mids(2, 3)})
	tbl, _ := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.FIFO})
	other, _ := b.NewTable(tensorbuf.TableConfig{Name: "u"})
	var keys []uint64
	for _, it := range []tensorbuf.Item{{Row: 0, Start: 0, Len: 2}, {Row: 0, Start: 1, Len: 3}, {Row: 1, Start: 0, Len: 4}, {Row: 0, Start: 2, Len: 2, Pad: 2}} {
		k, err := tbl.Insert(it)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Insert(it); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	a.add([]int{0}, mids(1, 9)) // row 0 overwrites step 0
	all, _ := tbl.All()
	if !slices.Equal(all.Keys, keys[1:]) || other.Size() != 3 {
		t.Fatalf("after overwriting row 0 step 0: keys %v (want %v), other table %d items", all.Keys, keys[1:], other.Size())
	}
	a.add([]int{0}, mids(1, 9)) // step 1
	a.add([]int{0}, mids(1, 9)) // step 2
	all, _ = tbl.All()
	if !slices.Equal(all.Keys, keys[2:3]) {
		t.Fatalf("after overwriting row 0 steps 1, 2: keys %v, want %v", all.Keys, keys[2:3])
	}
	hb, _ := all.Host()
	checkWindow(t, m, hb, 0, 1, 0, 4)
}

func TestRateLimiter(t *testing.T) {
	ctx := context.Background()
	t.Run("min size blocks until inserts", func(t *testing.T) {
		b, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: &tensorbuf.RateLimiter{MinSize: 3}}, 1, 1)
		_ = b
		done := make(chan error)
		go func() {
			_, err := tbl.Sample(ctx, 2)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("sample of a table under its minimum size returned %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 2, Len: 1}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("sample after the third insert: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: &tensorbuf.RateLimiter{MinSize: 5, Timeout: time.Millisecond}}, 1)
		if _, err := tbl.Sample(ctx, 1); !errors.Is(err, tensorbuf.ErrRateLimited) {
			t.Fatalf("err = %v, want ErrRateLimited", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: &tensorbuf.RateLimiter{MinSize: 5}}, 1)
		c, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		if _, err := tbl.Sample(c, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("samples per insert", func(t *testing.T) {
		// 2 samples per insert with an error buffer of 2 and min size 1:
		// inserts may run 2 samples ahead of the ratio, samplers 2 behind.
		rl := &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 2, ErrorBuffer: 2, Timeout: 5 * time.Millisecond}
		_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: rl}, 1, 1)
		insert := func() error { _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 2, Len: 1}); return err }
		sample := func(n int) error { _, err := tbl.Sample(ctx, n); return err }
		for i, step := range []struct {
			op   func() error
			want error
		}{
			{insert, tensorbuf.ErrRateLimited}, // diff 4: a third insert waits
			{func() error { return sample(4) }, nil},
			{func() error { return sample(1) }, tensorbuf.ErrRateLimited},
			{insert, nil},
			{func() error { return sample(2) }, nil},
			{func() error { return sample(1) }, tensorbuf.ErrRateLimited},
		} {
			if err := step.op(); !errors.Is(err, step.want) {
				t.Fatalf("step %d: err = %v, want %v", i, err, step.want)
			}
		}
	})
	t.Run("error buffer below the ratio", func(t *testing.T) {
		b := newBuffer(t, 1, 4)
		rl := &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 2, ErrorBuffer: 1}
		if _, err := b.NewTable(tensorbuf.TableConfig{Name: "t", RateLimiter: rl}); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Fatalf("err = %v, want ErrConfig", err)
		}
	})
	t.Run("close wakes samplers", func(t *testing.T) {
		b, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t", RateLimiter: &tensorbuf.RateLimiter{MinSize: 5}}, 1)
		done := make(chan error)
		go func() {
			_, err := tbl.Sample(ctx, 1)
			done <- err
		}()
		time.Sleep(5 * time.Millisecond)
		_ = b.Close()
		if err := <-done; !errors.Is(err, tensorbuf.ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	})
}

// TestConcurrentCollectorsAndLearners runs writers on disjoint rows,
// inserters and samplers at once (run with -race), and checks every
// sampled window against the values the writers wrote.
func TestConcurrentCollectorsAndLearners(t *testing.T) {
	const envs, capacity, steps = 4, 16, 300
	b := newBuffer(t, envs, capacity)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, MaxSize: 32,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1}, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var writers, learners sync.WaitGroup
	for r := range envs {
		w, err := b.NewWriter(r)
		if err != nil {
			t.Fatal(err)
		}
		writers.Add(1)
		go func() {
			defer writers.Done()
			for pos := range int64(steps) {
				s := makeStep(t, []int{r}, []int64{pos}, mids(1, float32(pos)))
				if err := w.Add(s); err != nil {
					t.Error(err)
					return
				}
				if pos >= 3 {
					if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: pos - 3, Len: 4, Priority: 1}); err != nil && !errors.Is(err, tensorbuf.ErrItem) {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	for range 2 {
		learners.Add(1)
		go func() {
			defer learners.Done()
			bt := new(tensorbuf.Batch)
			for ctx.Err() == nil {
				if err := tbl.SampleInto(ctx, bt, 8); err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				hb, err := bt.Host()
				if err != nil {
					t.Error(err)
					return
				}
				rew := floats(t, hb.Reward)
				obs := floats(t, hb.Fields["obs"])
				for i, it := range hb.Items {
					for k := range 4 {
						pos := it.Start + int64(k)
						if rew[i*4+k] != float64(pos) || obs[(i*4+k)*3] != val(0, it.Row, pos, 0) {
							t.Errorf("item %+v step %d: reward %v obs %v: torn or stale read", it, k, rew[i*4+k], obs[(i*4+k)*3])
							return
						}
					}
				}
			}
		}()
	}
	writers.Wait()
	cancel()
	learners.Wait()
}

func TestSampleWithDoneContextFails(t *testing.T) {
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t"}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tbl.Sample(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("sample with a cancelled context: %v", err)
	}
	if _, err := tbl.InsertContext(ctx, tensorbuf.Item{Row: 0, Start: 1, Len: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("insert with a cancelled context: %v", err)
	}
	if tbl.Size() != 1 {
		t.Fatalf("size %d", tbl.Size())
	}
}

func TestCanSampleCanInsert(t *testing.T) {
	b := newBuffer(t, 1, 16)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 8, 0)
	plain, err := b.NewTable(tensorbuf.TableConfig{Name: "plain", MaxTimesSampled: 1})
	if err != nil {
		t.Fatal(err)
	}
	limited, err := b.NewTable(tensorbuf.TableConfig{Name: "limited", RateLimiter: &tensorbuf.RateLimiter{
		MinSize: 2, SamplesPerInsert: 1, ErrorBuffer: 2, Timeout: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	type state struct{ s1, s2, s3, s5, ins bool }
	check := func(step string, tb *tensorbuf.Table, want state) {
		t.Helper()
		got := state{tb.CanSample(1), tb.CanSample(2), tb.CanSample(3), tb.CanSample(5), tb.CanInsert()}
		if got != want {
			t.Fatalf("%s: table %s: CanSample(1,2,3,5), CanInsert = %+v, want %+v", step, tb.Name(), got, want)
		}
		if tb.CanSample(0) || tb.CanSample(-1) {
			t.Fatalf("%s: CanSample of n < 1 is true", step)
		}
	}
	check("empty", plain, state{ins: true})
	check("empty", limited, state{ins: true})
	for k := range 2 {
		for _, tb := range []*tensorbuf.Table{plain, limited} {
			if _, err := tb.Insert(tensorbuf.Item{Row: 0, Start: int64(k), Len: 1, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// plain: 2 items sampled at most once each: 2 samples left.
	check("two items", plain, state{s1: true, s2: true, ins: true})
	// limited: 2 inserts, ratio 1, MinSize 2, ErrorBuffer 2: diff = 2,
	// sampling n needs 2-n >= 2-2, so n <= 2; inserting needs 2+1 <= 2+2.
	check("two items", limited, state{s1: true, s2: true, ins: true})
	if _, err := limited.Insert(tensorbuf.Item{Row: 0, Start: 2, Len: 1, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	// diff = 3: samples up to 3; a fourth insert would make diff+1 = 4 <= 4.
	check("three items", limited, state{s1: true, s2: true, s3: true, ins: true})
	if _, err := limited.Insert(tensorbuf.Item{Row: 0, Start: 3, Len: 1, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	// diff = 4: the next insert would need 5 <= 4: blocked.
	check("four items", limited, state{s1: true, s2: true, s3: true, ins: false})
	if _, err := limited.Insert(tensorbuf.Item{Row: 0, Start: 4, Len: 1, Priority: 1}); !errors.Is(err, tensorbuf.ErrRateLimited) {
		t.Fatalf("insert while CanInsert is false: %v, want ErrRateLimited", err)
	}
	bt, err := limited.Sample(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	_ = bt.Release()
	// diff = 1: sampling needs 1-n >= 0: only 1.
	check("after sampling 3", limited, state{s1: true, ins: true})
	if plain.CanSample(1) != true {
		t.Fatal("CanSample changed the table")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	check("closed", plain, state{})
	check("closed", limited, state{})
}
