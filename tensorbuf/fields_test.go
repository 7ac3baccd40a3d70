package tensorbuf_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// hostTimeFields are the two row kinds of the host-time benchmark:
// low-dimensional (an 8-float observation and an action) and 3 KB rows
// (a 3072-byte image and an action).
var hostTimeFields = map[string][]tensorbuf.Field{
	"low-dim": {
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{8}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	},
	"3KB": {
		{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{3072}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	},
}

// fullStep returns a step of every row of a writer over rows envs.
func fullStep(fields []tensorbuf.Field, rows int) *tensorbuf.Step {
	s := &tensorbuf.Step{
		StepType:     make([]tensorbuf.StepType, rows),
		NextStepType: make([]tensorbuf.StepType, rows),
		Reward:       make([]float32, rows),
		Discount:     make([]float32, rows),
		Values:       map[string]*tensor.Dense{},
	}
	for i := range rows {
		s.StepType[i], s.NextStepType[i], s.Discount[i] = tensorbuf.Mid, tensorbuf.Mid, 1
	}
	for _, f := range fields {
		shape := append([]int{rows}, f.Shape...)
		s.Values[f.Name] = tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(shape...))
	}
	return s
}

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
