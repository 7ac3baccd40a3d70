package observer_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

func newAddEpisode(t testing.TB, buf *tensorbuf.Buffer, max int, bypass bool) *observer.AddEpisode {
	t.Helper()
	o, err := observer.NewAddEpisode(buf, observer.AddEpisodeConfig{Tables: []string{"q"}, MaxSequenceLength: max, BypassPartialEpisodes: bypass})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestAddEpisodeItems: one item per whole episode, boundary included, per
// row; SetPriority between runs changes the priority of later episodes.
func TestAddEpisodeItems(t *testing.T) {
	buf := newBuffer(t, 2, 16, "q")
	o := newAddEpisode(t, buf, 4, false)
	env := counting(t, 2, 3) // row 0: F M L (3 steps), row 1: F M M L (4 steps)
	d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(o), driver.WithMaxIterations(4))
	if err != nil {
		t.Fatal(err)
	}
	ts, state, err := d.Run(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetPriority(5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(t.Context(), ts, state); err != nil {
		t.Fatal(err)
	}
	got := items(t, buf, "q")
	want := []string{"0@0 [0F 1M 2L P]", "1@0 [0F 1M 2M 3L]", "0@3 [3F 4M 5L P]", "1@4 [4F 5M 6M 7L]"}
	if !slices.Equal(strs(got), want) {
		t.Fatalf("items %q, want %q", strs(got), want)
	}
	var prio []float64
	for _, v := range got {
		prio = append(prio, v.Priority)
		if v.Pad != 0 {
			t.Errorf("%v: Pad %d, want 0 (episodes are not padded; the batch is)", v, v.Pad)
		}
	}
	if !slices.Equal(prio, []float64{1, 1, 5, 5}) {
		t.Errorf("priorities %v, want [1 1 5 5]", prio)
	}
	checkPads(t, got)
	if err := o.SetPriority(-1); !errors.Is(err, observer.ErrConfig) {
		t.Errorf("SetPriority(-1): err %v, want ErrConfig", err)
	}
	if c := o.Cached(); !slices.Equal(c, []int64{2, 0}) {
		t.Errorf("cached %v, want [2 0]", c)
	}
}

// TestAddEpisodeTooLong: row 1's episodes of 4 steps overflow a maximum of
// 3 at their boundary step. Without bypass the driver stops with
// ErrEpisodeTooLong naming row 1; resumed, it goes on, and the next
// episode starts afresh. With bypass nothing is reported. Row 0's
// episodes are written either way; row 1 writes only its first 3 steps.
func TestAddEpisodeTooLong(t *testing.T) {
	for _, bypass := range []bool{false, true} {
		t.Run(map[bool]string{false: "error", true: "bypass"}[bypass], func(t *testing.T) {
			buf := newBuffer(t, 2, 16, "q")
			o := newAddEpisode(t, buf, 3, bypass)
			env := counting(t, 2, 3)
			d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(o), driver.WithMaxIterations(8))
			if err != nil {
				t.Fatal(err)
			}
			var ts *driver.TimeStep
			var state any
			var iters []int64
			for range 3 {
				ts, state, err = d.Run(t.Context(), ts, state)
				if bypass {
					break
				}
				var se *driver.StepError
				if !errors.As(err, &se) || !errors.Is(err, observer.ErrEpisodeTooLong) || se.Row != 1 {
					t.Fatalf("err %v, want a StepError of row 1 wrapping ErrEpisodeTooLong", err)
				}
				iters = append(iters, se.Iteration)
			}
			if err != nil && bypass {
				t.Fatal(err)
			}
			want := []string{"0@0 [0F 1M 2L]", "0@3 [3F 4M 5L]"}
			if !bypass {
				// failures at iterations 3 (t3), 3 again after resuming at
				// t4 (t7), and 3 again (t11); t0..t11 seen.
				if !slices.Equal(iters, []int64{3, 3, 3}) {
					t.Errorf("failing iterations %v, want [3 3 3]", iters)
				}
				want = append(want, "0@6 [6F 7M 8L]", "0@9 [9F 10M 11L]")
			}
			if got := strs(items(t, buf, "q")); !slices.Equal(got, want) {
				t.Fatalf("items %q, want %q", got, want)
			}
			s := o.Stats()
			if bypass && (s.SkippedEpisodes != 2 || buf.Cursor(1) != 6) {
				t.Errorf("stats %+v, row 1 cursor %d; want 2 skipped episodes, cursor 6", s, buf.Cursor(1))
			}
			if !bypass && (s.SkippedEpisodes != 3 || buf.Cursor(1) != 9) {
				t.Errorf("stats %+v, row 1 cursor %d; want 3 skipped episodes, cursor 9", s, buf.Cursor(1))
			}
		})
	}
}

// TestAddEpisodeOverflowMidEpisode: an episode of 6 steps with a maximum
// of 3 is reported once, at its 4th step; its remaining steps are not
// written and the next episode starts afresh at its First step.
func TestAddEpisodeOverflowMidEpisode(t *testing.T) {
	buf := newBuffer(t, 1, 16, "q")
	o := newAddEpisode(t, buf, 3, false)
	ep6 := []tensorbuf.StepType{F, M, M, M, M, L}
	stream := append(append(slices.Clone(ep6), F, M, L), ep6...)
	var failed []int
	for k, st := range stream {
		next := F
		if k+1 < len(stream) {
			next = stream[k+1]
		}
		err := o.Observe(trajectory([]tensorbuf.StepType{st}, []tensorbuf.StepType{next}, []int64{int64(k)}))
		if err != nil {
			var re *driver.RowError
			if !errors.Is(err, observer.ErrEpisodeTooLong) || !errors.As(err, &re) || re.Row != 0 {
				t.Fatalf("step %d: err %v, want ErrEpisodeTooLong for row 0", k, err)
			}
			failed = append(failed, k)
		}
	}
	if !slices.Equal(failed, []int{3, 12}) {
		t.Errorf("failed at steps %v, want [3 12]", failed)
	}
	// Written: 0,1,2 then 6,7,8 (positions 3..5) then 9,10,11 (6..8).
	want := []string{"0@3 [6F 7M 8L]"}
	if got := strs(items(t, buf, "q")); !slices.Equal(got, want) {
		t.Fatalf("items %q, want %q", got, want)
	}
	if c := buf.Cursor(0); c != 9 {
		t.Errorf("cursor %d, want 9", c)
	}
}

// TestAddEpisodeReset: Reset(true) inserts the unfinished episode as it
// is, Reset(false) drops it; the next episode item starts after it.
func TestAddEpisodeReset(t *testing.T) {
	for _, write := range []bool{true, false} {
		t.Run(map[bool]string{true: "write", false: "drop"}[write], func(t *testing.T) {
			buf := newBuffer(t, 1, 16, "q")
			o := newAddEpisode(t, buf, 8, false)
			feed(t, o, []tensorbuf.StepType{F, M, M, L, F, M}, 0)
			if err := o.Reset(write); err != nil {
				t.Fatal(err)
			}
			if c := o.Cached(); !slices.Equal(c, []int64{0}) {
				t.Fatalf("cached %v after Reset", c)
			}
			feed(t, o, []tensorbuf.StepType{M, L}, 6)
			want := []string{"0@0 [0F 1M 2M 3L]"}
			if write {
				want = append(want, "0@4 [4F 5M P P]")
			}
			want = append(want, "0@6 [6M 7L P P]")
			if got := strs(items(t, buf, "q")); !slices.Equal(got, want) {
				t.Fatalf("items %q, want %q", got, want)
			}
		})
	}
}

// TestPerRowEpisodes: with the episode driver's per-row mode, a row that
// has its episodes is idle (inactive): observers neither write its steps
// nor change its state.
func TestPerRowEpisodes(t *testing.T) {
	buf := newBuffer(t, 2, 16, "q", "s")
	ep := newAddEpisode(t, buf, 8, false)
	env := counting(t, 1, 3) // row 0: F L (2 steps), row 1: F M M L (4 steps)
	d, err := driver.NewEpisodeDriver(env, newIterPolicy(t, env), 2, driver.WithObservers(ep), driver.EpisodesPerRow())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := d.Stats(); s.Iterations != 8 || s.Episodes != 4 {
		t.Fatalf("driver stats %+v, want 8 iterations and 4 episodes", s)
	}
	want := []string{"0@0 [0F 1L P P]", "0@2 [2F 3L P P]", "1@0 [0F 1M 2M 3L]", "1@4 [4F 5M 6M 7L]"}
	if got := strs(items(t, buf, "q")); !slices.Equal(got, want) {
		t.Fatalf("items %q, want %q", got, want)
	}
	if c0, c1 := buf.Cursor(0), buf.Cursor(1); c0 != 4 || c1 != 8 {
		t.Errorf("cursors %d, %d, want 4 (row 0 idle after 4 steps) and 8", c0, c1)
	}
	if s := ep.Stats(); s.Steps != 12 || s.Items != 4 {
		t.Errorf("stats %+v, want 12 steps and 4 items", s)
	}
}
