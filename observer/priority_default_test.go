package observer_test

import (
	"slices"
	"testing"

	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// TestObserverUsesTableMaxPriority: an observer without a priority
// inserts items with the table's running maximum priority.
func TestObserverUsesTableMaxPriority(t *testing.T) {
	buf := newBuffer(t, 1, 16, "a")
	o, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "a", SequenceLength: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, o, []tensorbuf.StepType{F, M}, 0)
	tbl, err := buf.Table("a")
	if err != nil {
		t.Fatal(err)
	}
	bt, err := tbl.All()
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Clone(bt.Keys)
	_ = bt.Release()
	if err := tbl.UpdatePriorities32(keys, []float32{7}); err != nil {
		t.Fatal(err)
	}
	feed(t, o, []tensorbuf.StepType{M}, 2)
	var ps []float64
	for _, v := range items(t, buf, "a") {
		ps = append(ps, v.Priority)
	}
	if !slices.Equal(ps, []float64{7, 7}) {
		t.Fatalf("priorities %v, want [7 7]", ps)
	}
}
