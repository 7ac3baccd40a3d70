package tensorbuf_test

import (
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// Episode 1 ends (next Last) but its boundary step is never stored: step 1
// is cut. Its final observation does not exist; step 2 is another episode.
func TestHindsightCutAtLast(t *testing.T) {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	steps := []goalStep{
		{F, M, 0, 9, -1, 1},
		{M, L, 1, 9, -1, 1}, // boundary step skipped after this
		{F, M, 10, 12, -1, 1},
		{M, L, 11, 12, 0, 0},
		{L, F, 12, 12, 0, 1},
	}
	b, _ := newGoalBuffer(t, nil, 8, steps)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	n, err := hs.Generate()
	t.Logf("Generate = %d, %v", n, err)
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range readHindsight(t, exp[0], rel) {
		if x.relabeled {
			t.Logf("relabeled step %d goal %v (episode's own goal source must not be pos 10)", x.step, x.goal)
			if x.step == 0 && x.goal == 10 {
				t.Errorf("step 0 relabeled with goal 10, the First step of the next episode (across the cut)")
			}
		}
	}
	at, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFuture, 1000, tensorbuf.RelabelAtSample))
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := at.SampleInto(ht, 400); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		if x.step == 0 && x.relabeled && x.goal >= 10 {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("RelabelAtSample: %d samples of step 0 took a goal from across the cut", bad)
	}
}

// A cut followed by a Mid step (a row idled by the driver).
func TestHindsightCutMid(t *testing.T) {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	steps := []goalStep{
		{F, M, 0, 9, -1, 1},
		{M, M, 1, 9, -1, 1},
		{M, L, 2, 9, -1, 1}, // cut: successor stored is Mid
		{M, M, 50, 60, -1, 1},
		{M, L, 51, 60, -1, 1},
		{L, F, 52, 60, 0, 1},
	}
	b, _ := newGoalBuffer(t, nil, 8, steps)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	n, err := hs.Generate()
	t.Logf("Generate = %d, %v", n, err)
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range readHindsight(t, exp[0], rel) {
		if x.relabeled {
			t.Logf("relabeled step %d goal %v", x.step, x.goal)
			if x.step < 2 && x.goal >= 50 {
				t.Errorf("step %d relabeled with goal %v from across the cut", x.step, x.goal)
			}
		}
	}
}

func TestHindsightCutMidSample(t *testing.T) {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	steps := []goalStep{
		{F, M, 0, 9, -1, 1},
		{M, M, 1, 9, -1, 1},
		{M, L, 2, 9, -1, 1}, // cut: successor stored is Mid of another run
		{M, M, 50, 60, -1, 1},
		{M, L, 51, 60, -1, 1},
		{L, F, 52, 60, 0, 1},
	}
	b, _ := newGoalBuffer(t, nil, 8, steps)
	at, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1000, tensorbuf.RelabelAtSample))
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := at.SampleInto(ht, 400); err != nil {
		t.Fatal(err)
	}
	bad := map[int64]float64{}
	for _, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		if x.step < 2 && x.relabeled && x.goal >= 50 {
			bad[x.step] = x.goal
		}
	}
	if len(bad) > 0 {
		t.Errorf("RelabelAtSample GoalFinal: goals from across the cut: %v", bad)
	}
}

func TestHindsightCutEpisode(t *testing.T) {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	steps := []goalStep{
		{F, M, 0, 9, -1, 1},
		{M, M, 1, 9, -1, 1},
		{M, M, 2, 9, -1, 1}, // the reset comes after this step
		{F, M, 10, 12, -1, 1},
		{M, L, 11, 12, -1, 1},
		{L, F, 12, 12, 0, 1},
	}
	b, _ := newGoalBuffer(t, nil, 8, steps)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hs.Generate(); n != 2 || err != nil {
		t.Fatalf("Generate = %d, %v; want the 2 transitions of the complete episode", n, err)
	}
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	var got []hsExp
	for _, x := range readHindsight(t, exp[0], rel) {
		if x.relabeled {
			got = append(got, x)
		}
	}
	if len(got) != 2 || got[0].step != 3 || got[0].goal != 12 || got[1].step != 4 || got[1].goal != 12 || got[1].reward != 0 || got[1].done != 1 {
		t.Fatalf("relabeled %+v", got)
	}
	at, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1000, tensorbuf.RelabelAtSample))
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := at.SampleInto(ht, 200); err != nil {
		t.Fatal(err)
	}
	// Transition 2 crosses the cut (its next observation is step 3); the
	// others take their own episode's final position.
	want := map[int64]float64{0: 2, 1: 2, 3: 12, 4: 12}
	for _, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		if g, ok := want[x.step]; ok && x.relabeled && x.goal != g {
			t.Fatalf("step %d relabeled with %v, want %v", x.step, x.goal, g)
		}
	}
}

// TestHindsightTwoRowsExportOrder relabels the same history on two rows,
// row 1 one step behind row 0, and checks the export's time-major,
// env-minor order with each real transition followed by its relabeled
// experience.
