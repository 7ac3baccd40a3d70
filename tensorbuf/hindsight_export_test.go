package tensorbuf_test

import (
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

func TestHindsightTwoRowsExportOrder(t *testing.T) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Fields: goalFields})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	s0 := lineSteps[0] // row 0 only
	err = w.Add(&tensorbuf.Step{
		Rows: []int{0}, StepType: []tensorbuf.StepType{s0.st}, NextStepType: []tensorbuf.StepType{s0.next},
		Reward: []float32{s0.reward}, Discount: []float32{s0.discount},
		Values: map[string]*tensor.Dense{
			"obs": tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{s0.pos, s0.goal, 100})),
			"act": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{0})),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(lineSteps); i++ {
		s0, s1 := lineSteps[i], lineSteps[i-1]
		err := w.Add(&tensorbuf.Step{
			StepType: []tensorbuf.StepType{s0.st, s1.st}, NextStepType: []tensorbuf.StepType{s0.next, s1.next},
			Reward: []float32{s0.reward, s1.reward}, Discount: []float32{s0.discount, s1.discount},
			Values: map[string]*tensor.Dense{
				"obs": tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{s0.pos, s0.goal, float32(100 + i), s1.pos, s1.goal, float32(100 + i - 1)})),
				"act": tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{0, 0})),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	// Row 1 lacks lineSteps' last step: its episodes 1 and 2 are complete.
	if n, err := hs.Generate(); n != 10 || err != nil {
		t.Fatalf("Generate = %d, %v", n, err)
	}
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	h, err := exp[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		row  int
		step int64
		rel  bool
	}
	var got []key
	for i := range h.Rows {
		got = append(got, key{h.Rows[i], h.Steps[i], rel[i]})
	}
	var want []key
	for _, s := range []int64{0, 1, 2, 4, 5, 7} {
		for row := range 2 {
			if row == 1 && s == 7 {
				continue // row 1 holds step 7 but not its successor
			}
			want = append(want, key{row, s, false})
			if s != 7 {
				want = append(want, key{row, s, true})
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
	// Row 1's step t holds the same values as row 0's.
	for i, x := range readHindsight(t, exp[0], rel) {
		want := realLine(x.step)
		if x.relabeled {
			final := 12.0
			if x.step < 3 {
				final = 3
			}
			want = relabeledLine(x.step, final)
		}
		if x != want {
			t.Fatalf("experience %d (row %d): %+v, want %+v", i, got[i].row, x, want)
		}
	}
}

// nstepLine is the model of an n-step hindsight transition at step s of
// lineSteps: real when relabeled is false, else relabeled with goal g.
