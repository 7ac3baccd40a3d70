package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

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

func TestMemoryBytesAfterClose(t *testing.T) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: testFields})
	if err != nil {
		t.Fatal(err)
	}
	n := b.MemoryBytes()
	_ = b.Close()
	if b.MemoryBytes() != n {
		t.Fatal("MemoryBytes changed after Close")
	}
}

// TestExportNoneExperiencesStandAlone: each experience of an ExportNone
// export copies only itself to the host, and reusing one for a sample
// leaves the others intact.
func TestExportNoneExperiencesStandAlone(t *testing.T) {
	b := newBuffer(t, 1, 8)
	m := newModel(1, 8)
	fill(t, b, m, [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2), mids(1, 3)})
	exp, err := b.AllExperiences(tensorbuf.ExportNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SampleTransitionsInto(exp[0], 3); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		h, err := exp[i].Host()
		if err != nil {
			t.Fatal(err)
		}
		checkTransition(t, m, h, i, 0, 0, int64(i))
	}
}
