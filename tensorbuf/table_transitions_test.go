package tensorbuf_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// exactSteps is one row of two episodes and a half: a termination, a
// truncation, boundary steps and, in a ring of 8, a wrap-around.
func exactSteps() []rawStep {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	return []rawStep{
		{F, M, 1, 1},   // 0: overwritten by step 8
		{M, M, 2, 1},   // 1: overwritten by step 9
		{M, L, 4, 0},   // 2: terminates
		{L, F, 0, 1},   // 3: boundary
		{F, M, 8, 1},   // 4
		{M, L, 16, 1},  // 5: truncated at a time limit
		{L, F, 0, 1},   // 6: boundary
		{F, M, 32, 1},  // 7
		{M, M, 64, 1},  // 8: slot 0
		{M, M, 128, 1}, // 9: slot 1, the newest step
	}
}

// TestTableTransitionsExact checks hand-computed transitions of items
// (in FIFO order, each sampled once) for every selector's path: n-step
// sums stopping at a termination and a truncation, discounts, IsDone,
// next observations, boundary windows and single-step items masked out.
func TestTableTransitionsExact(t *testing.T) {
	type want struct {
		start        int64
		ln, pad      int
		reward, disc float32
		done         float64
		next         int64 // step of the next observation
		valid        bool
	}
	for _, tc := range []struct {
		name  string
		n     int
		gamma float64
		want  []want
	}{
		{"n2 half, items of 3", 2, 0.5, []want{
			{2, 3, 0, 4, 0, 1, 3, true},              // terminates at once
			{3, 3, 0, 0, 0, 0, 3, false},             // starts at a boundary
			{4, 3, 0, 8 + 0.5*16, 0.25, 2, 6, true},  // stops at the truncation
			{5, 3, 0, 16, 0.5, 2, 6, true},           // truncated after one step
			{6, 3, 0, 0, 0, 0, 6, false},             // boundary
			{7, 3, 0, 32 + 0.5*64, 0.25, 0, 9, true}, // crosses the wrap-around
			{7, 2, 1, 32, 0.5, 0, 8, true},           // padded: one real step ahead
			{8, 1, 2, 0, 0, 0, 8, false},             // one real step: no transition
		}},
		{"n1 gamma1 is one-step", 1, 1, []want{
			{2, 2, 0, 4, 0, 1, 3, true},
			{3, 2, 0, 0, 0, 0, 3, false},
			{5, 2, 0, 16, 1, 2, 6, true},
			{7, 2, 0, 32, 1, 0, 8, true},
			{7, 3, 0, 32, 1, 0, 8, true}, // a longer item: the horizon bounds k
			{8, 2, 0, 64, 1, 0, 9, true},
		}},
		{"n3 gamma0.9 items of 4 across episodes", 3, 0.9, []want{
			{2, 4, 0, 4, 0, 1, 3, true},
			{4, 4, 0, float32(8 + 0.9*16), float32(0.9 * 0.9), 2, 6, true},
			{6, 4, 0, 0, 0, 0, 6, false},
		}},
	} {
		for _, be := range nstepBackends {
			t.Run(tc.name+"/"+be.name, func(t *testing.T) {
				b := newBufferOn(t, be.be(), 1, 8)
				a := fill(t, b, newModel(1, 8), nil)
				for _, s := range exactSteps() {
					a.add([]int{0}, []rawStep{s})
				}
				tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "fifo", Selector: tensorbuf.FIFO, MaxTimesSampled: 1})
				if err != nil {
					t.Fatal(err)
				}
				var keys []uint64
				for _, w := range tc.want {
					k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: w.start, Len: w.ln, Pad: w.pad, Priority: 1})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
				tr, err := tbl.SampleTransitions(context.Background(), len(tc.want), tensorbuf.NStepOptions{Horizon: tc.n, DiscountFactor: tc.gamma})
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Release()
				h, err := tr.Host()
				if err != nil {
					t.Fatal(err)
				}
				rew, disc, done := floats(t, h.Reward), floats(t, h.Discount), floats(t, h.IsDone)
				obs, next, act := floats(t, h.Observation["obs"]), floats(t, h.NextObservation["obs"]), floats(t, h.Action["act"])
				pix := floats(t, h.NextObservation["pix"])
				mw := tr.MaskedWeights32(nil)
				for i, w := range tc.want {
					if tr.Keys[i] != keys[i] || tr.Items[i].Start != w.start || tr.Steps[i] != w.start || tr.Rows[i] != 0 {
						t.Fatalf("transition %d: key %d item %+v step %d, want key %d start %d", i, tr.Keys[i], tr.Items[i], tr.Steps[i], keys[i], w.start)
					}
					if rew[i] != float64(w.reward) || disc[i] != float64(w.disc) || done[i] != w.done || tr.Valid[i] != w.valid {
						t.Fatalf("transition %d: reward %v discount %v done %v valid %v, want %+v", i, rew[i], disc[i], done[i], tr.Valid[i], w)
					}
					if obs[3*i] != val(0, 0, w.start, 0) || act[i] != val(2, 0, w.start, 0) {
						t.Fatalf("transition %d: obs %v act %v are not step %d's", i, obs[3*i], act[i], w.start)
					}
					if next[3*i+2] != val(0, 0, w.next, 2) || pix[4*i+3] != val(1, 0, w.next, 3) {
						t.Fatalf("transition %d: next obs %v is not step %d's %v", i, next[3*i+2], w.next, val(0, 0, w.next, 2))
					}
					if wantW := map[bool]float32{true: 1, false: 0}[w.valid]; mw[i] != wantW || tr.Weights[i] != 1 || tr.Probabilities[i] != 1 {
						t.Fatalf("transition %d: masked weight %v weight %v probability %v", i, mw[i], tr.Weights[i], tr.Probabilities[i])
					}
				}
				if tbl.Size() != 0 {
					t.Fatalf("table holds %d items after sampling each once", tbl.Size())
				}
			})
		}
	}
}

// TestTableTransitionsPrioritized checks keys, probabilities and weights
// of a prioritized table against its sequence sample with the same seed.
func TestTableTransitionsPrioritized(t *testing.T) {
	mk := func() *tensorbuf.Table {
		b := newBuffer(t, 1, 8)
		a := fill(t, b, newModel(1, 8), nil)
		for _, s := range exactSteps() {
			a.add([]int{0}, []rawStep{s})
		}
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: tensorbuf.Prioritized, Beta: 0.5, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for s := int64(2); s <= 7; s++ {
			if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: s, Len: 3, Priority: float64(s)}); err != nil {
				t.Fatal(err)
			}
		}
		return tbl
	}
	bt, err := mk().Sample(context.Background(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	tr, err := mk().SampleTransitions(context.Background(), 16, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Release()
	if tr.TableSize != 6 {
		t.Fatalf("table size %d", tr.TableSize)
	}
	for i := range 16 {
		if tr.Keys[i] != bt.Keys[i] || tr.Probabilities[i] != bt.Probabilities[i] || tr.Weights[i] != bt.Weights[i] || tr.Items[i] != bt.Items[i] {
			t.Fatalf("draw %d: %d %v %v %+v, sequence sample %d %v %v %+v", i, tr.Keys[i], tr.Probabilities[i], tr.Weights[i], tr.Items[i],
				bt.Keys[i], bt.Probabilities[i], bt.Weights[i], bt.Items[i])
		}
		if want := tr.Items[i].Start != 3 && tr.Items[i].Start != 6; tr.Valid[i] != want {
			t.Fatalf("draw %d: item %+v valid %v", i, tr.Items[i], tr.Valid[i])
		}
	}
}

// TestTableTransitionsRejectsAndConsumesNothing checks bad arguments.
func TestTableTransitionsRejectsAndConsumesNothing(t *testing.T) {
	b := newBuffer(t, 1, 8)
	a := fill(t, b, newModel(1, 8), nil)
	for _, s := range exactSteps() {
		a.add([]int{0}, []rawStep{s})
	}
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "f", Selector: tensorbuf.FIFO, MaxTimesSampled: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 4, Len: 2}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 0.9}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"n 0", func() error { _, err := tbl.SampleTransitions(ctx, 0, good); return err }, tensorbuf.ErrInvalidArg},
		{"nil", func() error { return tbl.SampleTransitionsInto(ctx, nil, 1, good) }, tensorbuf.ErrInvalidArg},
		{"horizon 0", func() error {
			_, err := tbl.SampleTransitions(ctx, 1, tensorbuf.NStepOptions{DiscountFactor: 1})
			return err
		}, tensorbuf.ErrInvalidArg},
		{"gamma 2", func() error {
			_, err := tbl.SampleTransitions(ctx, 1, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 2})
			return err
		}, tensorbuf.ErrInvalidArg},
		{"more than the budget", func() error { _, err := tbl.SampleTransitions(ctx, 2, good); return err }, tensorbuf.ErrEmpty},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if tbl.Size() != 1 {
			t.Fatalf("%s consumed the item", tc.name)
		}
	}
}

// TestGapsEndTransitions: steps never written between two stored steps
// (an observer skipping an episode) cut the row: no transition, n-step
// window or episode-aware window runs across the cut.
func TestGapsEndTransitions(t *testing.T) {
	b := newBuffer(t, 1, 16)
	m := newModel(1, 16)
	M := tensorbuf.Mid
	steps := []rawStep{
		{st: tensorbuf.First, next: M, reward: 1, discount: 1},
		{st: M, next: M, reward: 2, discount: 1}, // its successor was skipped
		{st: tensorbuf.First, next: M, reward: 3, discount: 1},
		{st: M, next: tensorbuf.Last, reward: 4, discount: 0},
		{st: tensorbuf.Last, next: tensorbuf.First, discount: 1},
	}
	var metas [][]rawStep
	for _, s := range steps {
		metas = append(metas, []rawStep{s})
	}
	fill(t, b, m, metas)
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	if got := exp[0].Steps; !slices.Equal(got, []int64{0, 2, 3}) {
		t.Fatalf("transitions at %v, want [0 2 3] (none from the step before the gap)", got)
	}
	ns, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ns[0].Host()
	// From 0: one step only, r0, bootstrapping from step 1 (step 1 has no
	// successor, so its reward cannot be followed by a next observation).
	if got := floats(t, h.Reward); !slices.Equal(got, []float64{1, 3 + 0.5*4, 4}) {
		t.Fatalf("n-step rewards %v", got)
	}
	if got := floats(t, h.NextObservation["obs"])[0]; got != val(0, 0, 1, 0) {
		t.Fatalf("next observation of the first transition %v, want step 1's %v", got, val(0, 0, 1, 0))
	}
	for range 20 {
		bt, err := b.SampleSequences(1, 3, tensorbuf.SequenceOptions{EpisodeAware: true})
		if err != nil {
			t.Fatal(err)
		}
		if it := bt.Items[0]; it.Start <= 1 && it.Start+int64(it.Len) > 2 {
			t.Fatalf("episode-aware window %+v runs across the gap", it)
		}
	}
}
