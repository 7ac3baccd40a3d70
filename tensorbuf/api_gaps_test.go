package tensorbuf_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// fillRow writes n Mid steps into row 0 of b through w.
func fillRow(t *testing.T, w *tensorbuf.Writer, n int, from int64) {
	t.Helper()
	for k := range n {
		s := makeStep(t, []int{0}, []int64{from + int64(k)}, []rawStep{{st: tensorbuf.Mid, next: tensorbuf.Mid, reward: 1, discount: 1}})
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
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

func TestBatchAndTransitionsField(t *testing.T) {
	b := newBuffer(t, 1, 8)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 3, 0)
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	bt, err := tb.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want *tensor.Dense
	}{
		{"obs", bt.Fields["obs"]}, {"flag", bt.Fields["flag"]}, {tensorbuf.StepTypeName, bt.StepType},
		{tensorbuf.NextStepTypeName, bt.NextStepType}, {tensorbuf.RewardName, bt.Reward},
		{tensorbuf.DiscountName, bt.Discount}, {tensorbuf.MaskName, bt.Mask},
	} {
		got, err := bt.Field(tc.name)
		if err != nil || got != tc.want || got == nil {
			t.Errorf("Batch.Field(%q) = %p, %v; want %p", tc.name, got, err, tc.want)
		}
	}
	_, err = bt.Field("osb")
	if !errors.Is(err, tensorbuf.ErrUnknownField) || !strings.Contains(err.Error(), `"osb"`) || !strings.Contains(err.Error(), "obs") {
		t.Errorf("Batch.Field(typo) = %v, want ErrUnknownField naming the typo and the fields", err)
	}
	_ = bt.Release()
	if _, err := bt.Field("obs"); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("Field after Release: %v, want ErrInvalidArg", err)
	}

	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	tr := exp[0]
	for _, tc := range []struct {
		name string
		want *tensor.Dense
	}{
		{"obs", tr.Observation["obs"]}, {"act", tr.Action["act"]}, {"logp", tr.PolicyInfo["logp"]},
		{tensorbuf.RewardName, tr.Reward}, {tensorbuf.DiscountName, tr.Discount}, {tensorbuf.IsDoneName, tr.IsDone},
	} {
		got, err := tr.Field(tc.name)
		if err != nil || got != tc.want || got == nil {
			t.Errorf("Transitions.Field(%q) = %p, %v; want %p", tc.name, got, err, tc.want)
		}
	}
	if got, err := tr.Next("pix"); err != nil || got != tr.NextObservation["pix"] {
		t.Errorf("Next(pix) = %p, %v", got, err)
	}
	for _, name := range []string{"act_", "mask", "step_type"} {
		if _, err := tr.Field(name); !errors.Is(err, tensorbuf.ErrUnknownField) {
			t.Errorf("Transitions.Field(%q) = %v, want ErrUnknownField", name, err)
		}
	}
	if _, err := tr.Next("act"); !errors.Is(err, tensorbuf.ErrUnknownField) {
		t.Errorf("Next(act) = %v, want ErrUnknownField", err)
	}
	_ = tr.Release()
	if _, err := tr.Field("obs"); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("Transitions.Field after Release: %v, want ErrInvalidArg", err)
	}
}

func TestShapeErrorIsReadable(t *testing.T) {
	b := newBuffer(t, 4, 8)
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	meta := make([]rawStep, 4)
	for _, tc := range []struct {
		field string
		shape []int
		want  string
	}{
		{"obs", []int{3}, `field "obs": want shape [4 3] (4 rows x [3]), got [3]`},
		{"obs", []int{4, 2}, `field "obs": want shape [4 3] (4 rows x [3]), got [4 2]`},
		{"pix", []int{2, 2, 2}, `field "pix": want shape [4 2 2] (4 rows x [2 2]), got [2 2 2]`},
		{"act", []int{4, 1}, `field "act": want shape [4] (4 rows of scalars), got [4 1]`},
	} {
		s := makeStep(t, []int{0, 1, 2, 3}, []int64{0, 0, 0, 0}, meta)
		fd := testFields[slices.IndexFunc(testFields, func(f tensorbuf.Field) bool { return f.Name == tc.field })]
		n := 1
		for _, d := range tc.shape {
			n *= d
		}
		s.Values[tc.field] = denseOf(fd.DType, tc.shape, make([]float64, n))
		err := w.Add(s)
		if !errors.Is(err, tensorbuf.ErrShape) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("shape %v: %v, want ErrShape ending %q", tc.shape, err, tc.want)
		}
	}
	if b.Cursor(0) != 0 {
		t.Fatal("a refused add wrote a step")
	}
}

func TestExportModeZeroIsInvalid(t *testing.T) {
	b := newBuffer(t, 1, 8)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 3, 0)
	var unset tensorbuf.ExportMode
	if _, err := b.AllExperiences(unset); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("AllExperiences(0) = %v, want ErrInvalidArg", err)
	}
	if _, err := b.AllNStepExperiences(unset, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("AllNStepExperiences(0) = %v, want ErrInvalidArg", err)
	}
	for _, m := range []tensorbuf.ExportMode{tensorbuf.ExportNone, tensorbuf.ExportBatch, tensorbuf.ExportSequence} {
		exp, err := b.AllExperiences(m)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		_ = exp[0].Release()
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct {
		v    interface{ String() string }
		want string
	}{
		{tensorbuf.ExportNone, "none"}, {tensorbuf.ExportBatch, "batch"}, {tensorbuf.ExportSequence, "sequence"},
		{tensorbuf.ExportMode(0), "ExportMode(0)"},
		{tensorbuf.RelabelAtEpisodeEnd, "at-episode-end"}, {tensorbuf.RelabelAtSample, "at-sample"},
		{tensorbuf.RelabelMode(7), "RelabelMode(7)"},
		{tensorbuf.Uniform, "uniform"}, {tensorbuf.GoalFuture, "future"}, {tensorbuf.Mid, "M"},
		{tensorbuf.Action, "action"}, {tensorbuf.Uint8, "uint8"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%T(%v).String() = %q, want %q", tc.v, tc.v, got, tc.want)
		}
	}
}

// TestItemMask: items of different lengths and their own padding in one
// batch: Mask is false on both paddings, ItemMask only on the batch's.
func TestItemMask(t *testing.T) {
	b := newBuffer(t, 1, 16)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 6, 0)
	tb, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.FIFO})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []tensorbuf.Item{
		{Row: 0, Start: 0, Len: 4, Priority: 1},         // longest: L = 4
		{Row: 0, Start: 1, Len: 1, Pad: 1, Priority: 1}, // 1 real, 1 own pad, 2 batch pad
		{Row: 0, Start: 2, Len: 2, Priority: 1},         // 2 real, 2 batch pad
	} {
		if _, err := tb.Insert(it); err != nil {
			t.Fatal(err)
		}
	}
	bt, err := tb.All()
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	h, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	im, err := h.ItemMask()
	if err != nil {
		t.Fatal(err)
	}
	if s := im.Shape(); !slices.Equal(s, []int{3, 4}) {
		t.Fatalf("ItemMask shape %v", s)
	}
	wantItem := []bool{true, true, true, true, true, true, false, false, true, true, false, false}
	wantMask := []bool{true, true, true, true, true, false, false, false, true, true, false, false}
	if got := im.Data().([]bool); !slices.Equal(got, wantItem) {
		t.Errorf("ItemMask %v, want %v", got, wantItem)
	}
	if got := h.Mask.Data().([]bool); !slices.Equal(got, wantMask) {
		t.Errorf("Mask %v, want %v", got, wantMask)
	}
	_ = h.Release()
	if _, err := h.ItemMask(); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("ItemMask after Release: %v", err)
	}
}
