package tensorbuf_test

import (
	"errors"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestMarkCut: Writer.MarkCut makes a row's newest step a cut (counted
// once in Stats, with the transition it drops unless the step is a
// boundary), so no transition runs from it into the next step even though
// that step's StepType continues the row; rows without steps and steps
// already cut are left alone; a refused call marks nothing.
func TestMarkCut(t *testing.T) {
	var (
		fm = rawStep{tensorbuf.First, tensorbuf.Mid, 1, 1}
		mm = rawStep{tensorbuf.Mid, tensorbuf.Mid, 2, 1}
		ml = rawStep{tensorbuf.Mid, tensorbuf.Last, 3, 0}
		lf = rawStep{tensorbuf.Last, tensorbuf.First, 0, 1}
	)
	tests := []struct {
		name   string
		before []rawStep // row 0's steps before MarkCut
		marks  int       // MarkCut(0) calls
		after  []rawStep // steps after, each continuing the previous one
		stats  tensorbuf.Stats
		steps  []int64 // steps of row 0 that start a transition (the newest starts none yet)
	}{
		{"mid-episode", []rawStep{fm, mm, mm}, 1, []rawStep{ml, lf}, tensorbuf.Stats{Steps: 5, Cuts: 1, DroppedTransitions: 1}, []int64{0, 1, 3}},
		{"marked twice counts once", []rawStep{fm, mm, mm}, 2, []rawStep{ml, lf}, tensorbuf.Stats{Steps: 5, Cuts: 1, DroppedTransitions: 1}, []int64{0, 1, 3}},
		{"boundary step drops nothing", []rawStep{fm, ml, lf}, 1, []rawStep{fm, ml}, tensorbuf.Stats{Steps: 5, Cuts: 1}, []int64{0, 1, 3}},
		{"first step", []rawStep{fm}, 1, []rawStep{mm, ml}, tensorbuf.Stats{Steps: 3, Cuts: 1, DroppedTransitions: 1}, []int64{1}},
		{"empty row", nil, 1, []rawStep{fm, mm, ml}, tensorbuf.Stats{Steps: 3}, []int64{0, 1}},
		{"no mark", []rawStep{fm, mm, mm}, 0, []rawStep{ml, lf}, tensorbuf.Stats{Steps: 5}, []int64{0, 1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuffer(t, 2, 16)
			w, err := b.NewWriter(0)
			if err != nil {
				t.Fatal(err)
			}
			pos := int64(0)
			add := func(s rawStep) {
				t.Helper()
				if err := w.Add(makeStep(t, []int{0}, []int64{pos}, []rawStep{s})); err != nil {
					t.Fatalf("step %d: %v", pos, err)
				}
				pos++
			}
			for _, s := range tc.before {
				add(s)
			}
			for range tc.marks {
				if err := w.MarkCut(0); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.after {
				add(s)
			}
			if got := b.Stats(); got != tc.stats {
				t.Fatalf("Stats = %+v, want %+v", got, tc.stats)
			}
			got := exportAll(t, b)
			if !equalSteps(got.steps, tc.steps) {
				t.Fatalf("transitions start at steps %v, want %v", got.steps, tc.steps)
			}
		})
	}
}

func equalSteps(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMarkCutRefused: a row that is not the writer's (ErrRows) or a
// closed writer (ErrClosed) marks nothing, not even the writer's own
// rows given with it.
func TestMarkCutRefused(t *testing.T) {
	b := newBuffer(t, 3, 8)
	w, err := b.NewWriter(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := []rawStep{{tensorbuf.First, tensorbuf.Mid, 1, 1}, {tensorbuf.First, tensorbuf.Mid, 1, 1}}
	if err := w.Add(makeStep(t, []int{0, 1}, []int64{0, 0}, st)); err != nil {
		t.Fatal(err)
	}
	for _, rows := range [][]int{{0, 2}, {1, 5}, {-1}, {0, 0}} {
		if err := w.MarkCut(rows...); !errors.Is(err, tensorbuf.ErrRows) {
			t.Fatalf("MarkCut(%v) = %v, want ErrRows", rows, err)
		}
	}
	if err := w.MarkCut(); err != nil {
		t.Fatalf("MarkCut() = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.MarkCut(0); !errors.Is(err, tensorbuf.ErrClosed) {
		t.Fatalf("MarkCut after Close = %v, want ErrClosed", err)
	}
	if got, want := b.Stats(), (tensorbuf.Stats{Steps: 2}); got != want {
		t.Fatalf("refused calls changed Stats: %+v, want %+v", got, want)
	}
	// The steps still continue: a transition from step 0 of each row
	// (step 1, the newest, starts none yet).
	w2, err := b.NewWriter(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	mid := []rawStep{{tensorbuf.Mid, tensorbuf.Last, 2, 0}, {tensorbuf.Mid, tensorbuf.Last, 2, 0}}
	if err := w2.Add(makeStep(t, []int{0, 1}, []int64{1, 1}, mid)); err != nil {
		t.Fatal(err)
	}
	if got := exportAll(t, b); !equalSteps(got.steps, []int64{0, 0}) || len(got.rows) != 2 || got.rows[0] == got.rows[1] {
		t.Fatalf("transitions at steps %v of rows %v, want step 0 of rows 0 and 1", got.steps, got.rows)
	}
}
