package tensorbuf_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestBatchFollowsItsBuffers samples one batch from two buffers of the same
// fields in turn, with batch sizes that grow (a new output arena) and
// shrink (the same arena, its gather columns reused), from the buffers
// directly and from a device-selecting table of each: every item must
// hold its own buffer's steps (the buffers differ in rewards and in the
// positions their rings hold).
func TestBatchFollowsItsBuffers(t *testing.T) {
	type src struct {
		b   *tensorbuf.Buffer
		m   *model
		tbl *tensorbuf.Table
	}
	mk := func(adds int, r0 float32) src {
		b, m := newBuffer(t, 2, 8), newModel(2, 8)
		var metas [][]rawStep
		for i := range adds {
			metas = append(metas, mids(2, r0+float32(10*i)))
		}
		fill(t, b, m, metas)
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", DeviceSelection: true, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for s := m.oldest(r); s+2 <= m.cursor(r); s++ {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 2}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return src{b, m, tbl}
	}
	a, b := mk(12, 0), mk(5, 500)
	ctx := context.Background()
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	for step, c := range []struct {
		s     src
		n     int
		table bool
	}{
		{a, 4, false}, {a, 6, false}, {a, 3, false}, {b, 3, false}, {b, 5, false}, {a, 2, false},
		{a, 4, true}, {a, 6, true}, {a, 3, true}, {b, 3, true}, {a, 3, true}, {b, 2, false}, {b, 2, true},
	} {
		var err error
		if c.table {
			err = c.s.tbl.SampleInto(ctx, bt, c.n)
		} else {
			err = c.s.b.SampleSequencesInto(bt, c.n, 2, tensorbuf.SequenceOptions{})
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		hb, err := bt.Host()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !c.table && (bt.KeyTensor != nil || len(hb.Keys) != 0) {
			t.Fatalf("step %d: a direct sample kept a device selection's keys (%v, %v)", step, bt.KeyTensor, hb.Keys)
		}
		if len(hb.Items) != c.n {
			t.Fatalf("step %d: %d items, want %d", step, len(hb.Items), c.n)
		}
		for i, it := range hb.Items {
			checkWindow(t, c.s.m, hb, i, it.Row, it.Start, it.Len)
		}
	}
}

// TestFailedSampleKeepsTheBatch: a sample that fails leaves the batch's
// items and tensors as they were (here the first call succeeds without
// episode awareness; the second, episode-aware, finds only boundary
// steps to start from).
func TestFailedSampleKeepsTheBatch(t *testing.T) {
	b := newBuffer(t, 1, 8)
	m := newModel(1, 8)
	var metas [][]rawStep
	for range 4 {
		metas = append(metas, []rawStep{{st: tensorbuf.Last, next: tensorbuf.First, discount: 1}})
	}
	fill(t, b, m, metas)
	bt := new(tensorbuf.Batch)
	if err := b.SampleSequencesInto(bt, 3, 2, tensorbuf.SequenceOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SampleSequencesInto(bt, 100, 2, tensorbuf.SequenceOptions{EpisodeAware: true}); !errors.Is(err, tensorbuf.ErrEmpty) {
		t.Fatalf("episode-aware sample of boundary steps: %v", err)
	}
	after, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.Items, after.Items) || !slices.Equal(floats(t, before.Fields["obs"]), floats(t, after.Fields["obs"])) {
		t.Fatalf("failed sample changed the batch: %v -> %v", before.Items, after.Items)
	}
	tr := new(tensorbuf.Transitions)
	if err := b.SampleTransitionsInto(tr, 2); !errors.Is(err, tensorbuf.ErrEmpty) || tr.Rows != nil {
		t.Fatalf("transitions of boundary steps: %v, rows %v", err, tr.Rows)
	}
}

// TestBatchReusedOnAnotherBuffer: a batch or transitions value moved to a
// buffer with other fields takes that buffer's layout.
func TestBatchReusedOnAnotherBuffer(t *testing.T) {
	a := newBuffer(t, 1, 8)
	fill(t, a, newModel(1, 8), [][]rawStep{mids(1, 0), mids(1, 1)})
	other, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 8, Backend: a.Backend(),
		Fields: []tensorbuf.Field{{Name: "y", DType: tensorbuf.Float32, Shape: []int{3}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w, _ := other.NewWriter()
	for range 2 {
		s := &tensorbuf.Step{StepType: []tensorbuf.StepType{1}, NextStepType: []tensorbuf.StepType{1}, Reward: []float32{7}, Discount: []float32{1},
			Values: map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{1, 2, 3}))}}
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	bt, tr := new(tensorbuf.Batch), new(tensorbuf.Transitions)
	if err := a.SampleSequencesInto(bt, 2, 1, tensorbuf.SequenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.SampleTransitionsInto(tr, 2); err != nil {
		t.Fatal(err)
	}
	if err := other.SampleSequencesInto(bt, 2, 1, tensorbuf.SequenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := other.SampleTransitionsInto(tr, 2); err != nil {
		t.Fatal(err)
	}
	hb, _ := bt.Host()
	ht, _ := tr.Host()
	if _, ok := hb.Fields["obs"]; ok || !slices.Equal(floats(t, hb.Fields["y"]), []float64{1, 2, 3, 1, 2, 3}) {
		t.Fatalf("batch fields %v", hb.Fields)
	}
	// other holds one transition (at step 0): both draws are it.
	if !slices.Equal(floats(t, ht.Observation["y"]), []float64{1, 2, 3, 1, 2, 3}) || !slices.Equal(floats(t, ht.Reward), []float64{7, 7}) {
		t.Fatalf("transitions %v reward %v", ht.Observation, ht.Reward)
	}
}

func TestRateLimitedBatchBeyondTheErrorBuffer(t *testing.T) {
	_, tbl, _ := tableWith(t, tensorbuf.TableConfig{Name: "t",
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: 2}}, 1, 1, 1)
	if _, err := tbl.Sample(context.Background(), 5); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("a batch that could never be served: %v", err)
	}
}
