package observer_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// item-writing observers, as the lifecycle tests use them.
type writerObserver interface {
	driver.Observer
	Flush() error
	Reset(bool) error
	Close() error
	Open() error
	Stats() observer.Stats
}

// constructors builds each kind of item-writing observer over rows of a
// buffer that has a table "q".
var constructors = map[string]func(buf *tensorbuf.Buffer, rows []int) (writerObserver, error){
	"TrajectorySequence": func(buf *tensorbuf.Buffer, rows []int) (writerObserver, error) {
		return observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 2, Rows: rows})
	},
	"AddTrajectory": func(buf *tensorbuf.Buffer, rows []int) (writerObserver, error) {
		return observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: 2}}, Rows: rows})
	},
	"AddEpisode": func(buf *tensorbuf.Buffer, rows []int) (writerObserver, error) {
		return observer.NewAddEpisode(buf, observer.AddEpisodeConfig{Tables: []string{"q"}, MaxSequenceLength: 4, Rows: rows})
	},
}

// TestRowsOwned: a second observer on any row an open observer writes is
// refused with tensorbuf.ErrRowOwned; disjoint rows are fine; Close
// releases the rows and Open takes them back, or is refused in turn.
func TestRowsOwned(t *testing.T) {
	for name, mk := range constructors {
		for name2, mk2 := range constructors {
			t.Run(name+"/"+name2, func(t *testing.T) {
				buf := newBuffer(t, 4, 8, "q")
				a, err := mk(buf, []int{0, 1})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := mk2(buf, []int{1, 2}); !errors.Is(err, tensorbuf.ErrRowOwned) {
					t.Fatalf("overlapping observer: err %v, want ErrRowOwned", err)
				}
				b, err := mk2(buf, []int{2, 3})
				if err != nil {
					t.Fatalf("disjoint observer: %v", err)
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				c, err := mk2(buf, []int{1, 2})
				if err != nil {
					t.Fatalf("after Close: %v", err)
				}
				if err := a.Open(); !errors.Is(err, tensorbuf.ErrRowOwned) {
					t.Fatalf("Open of rows taken meanwhile: err %v, want ErrRowOwned", err)
				}
				if err := a.Observe(trajectory([]tensorbuf.StepType{F, F}, []tensorbuf.StepType{M, M}, []int64{0, 0})); !errors.Is(err, observer.ErrClosed) {
					t.Fatalf("Observe after a failed Open: err %v, want ErrClosed", err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if err := a.Open(); err != nil {
					t.Fatalf("Open of free rows: %v", err)
				}
			})
		}
	}
}

// TestCloseOpen: a closed observer refuses Observe, Flush and Reset with
// ErrClosed, Close twice is a no-op, and after Open the caches are empty:
// windows start at the next step.
func TestCloseOpen(t *testing.T) {
	buf := newBuffer(t, 1, 16, "q")
	o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 2})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, o, []tensorbuf.StepType{F, M, M}, 0) // items [0 1] [1 2]
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	step := trajectory([]tensorbuf.StepType{M}, []tensorbuf.StepType{M}, []int64{3})
	if err := o.Observe(step); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("Observe: err %v, want ErrClosed", err)
	}
	if err := o.Flush(); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("Flush: err %v, want ErrClosed", err)
	}
	if err := o.Reset(true); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("Reset: err %v, want ErrClosed", err)
	}
	if c := buf.Cursor(0); c != 3 {
		t.Fatalf("cursor %d after refused calls, want 3", c)
	}
	if err := o.Open(); err != nil {
		t.Fatal(err)
	}
	if err := o.Open(); err != nil {
		t.Fatalf("second Open: %v", err)
	}
	feed(t, o, []tensorbuf.StepType{M, M, L}, 3) // cache restarts at position 3
	want := []string{"0@0 [0F 1M]", "0@1 [1M 2M]", "0@3 [3M 4M]", "0@4 [4M 5L]"}
	if got := strs(items(t, buf, "q")); !slices.Equal(got, want) {
		t.Fatalf("items %q, want %q", got, want)
	}
	if s := o.Stats(); s.Steps != 6 || s.Items != 4 {
		t.Errorf("stats %+v, want 6 steps and 4 items", s)
	}
}

// TestConfigErrors: invalid configurations are refused with ErrConfig (and
// the tensorbuf cause where there is one) and leave the rows free.
func TestConfigErrors(t *testing.T) {
	seq := func(c observer.SequenceConfig) func(*tensorbuf.Buffer) error {
		return func(b *tensorbuf.Buffer) error { _, err := observer.NewTrajectorySequence(b, c); return err }
	}
	add := func(c observer.AddTrajectoryConfig) func(*tensorbuf.Buffer) error {
		return func(b *tensorbuf.Buffer) error { _, err := observer.NewAddTrajectory(b, c); return err }
	}
	ep := func(c observer.AddEpisodeConfig) func(*tensorbuf.Buffer) error {
		return func(b *tensorbuf.Buffer) error { _, err := observer.NewAddEpisode(b, c); return err }
	}
	q := []string{"q"}
	cases := []struct {
		name  string
		build func(*tensorbuf.Buffer) error
		also  error
	}{
		{"tile without pad", seq(observer.SequenceConfig{Tables: q, SequenceLength: 2, TileEndOfEpisodes: true}), nil},
		{"add tile without pad", add(observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: 2}}, TileEndOfEpisodes: true}), nil},
		{"zero length", seq(observer.SequenceConfig{Tables: q}), nil},
		{"negative length", add(observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: -1}}}), nil},
		{"length above capacity", seq(observer.SequenceConfig{Tables: q, SequenceLength: 9}), tensorbuf.ErrSequenceLen},
		{"one table above capacity", add(observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: 2}, {Table: "r", SequenceLength: 9}}}), tensorbuf.ErrSequenceLen},
		{"negative stride", seq(observer.SequenceConfig{Tables: q, SequenceLength: 2, Stride: -1}), nil},
		{"negative priority", seq(observer.SequenceConfig{Tables: q, SequenceLength: 2, Priority: -1}), nil},
		{"NaN priority", ep(observer.AddEpisodeConfig{Tables: q, MaxSequenceLength: 2, Priority: math.NaN()}), nil},
		{"unknown table", seq(observer.SequenceConfig{Tables: []string{"nope"}, SequenceLength: 2}), tensorbuf.ErrUnknownTable},
		{"no table", add(observer.AddTrajectoryConfig{}), nil},
		{"table twice", seq(observer.SequenceConfig{Tables: []string{"q", "q"}, SequenceLength: 2}), nil},
		{"episode length 0", ep(observer.AddEpisodeConfig{Tables: q}), nil},
		{"episode length -3", ep(observer.AddEpisodeConfig{Tables: q, MaxSequenceLength: -3}), nil},
		{"episode above capacity", ep(observer.AddEpisodeConfig{Tables: q, MaxSequenceLength: 9}), tensorbuf.ErrSequenceLen},
		{"row out of range", seq(observer.SequenceConfig{Tables: q, SequenceLength: 2, Rows: []int{2}}), tensorbuf.ErrRows},
		{"row twice", ep(observer.AddEpisodeConfig{Tables: q, MaxSequenceLength: 2, Rows: []int{0, 0}}), tensorbuf.ErrRows},
		{"empty rows", seq(observer.SequenceConfig{Tables: q, SequenceLength: 2, Rows: []int{}}), nil},
		{"nil buffer", func(*tensorbuf.Buffer) error {
			_, err := observer.NewTrajectorySequence(nil, observer.SequenceConfig{Tables: q, SequenceLength: 2})
			return err
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := newBuffer(t, 2, 8, "q", "r")
			err := tc.build(buf)
			if !errors.Is(err, observer.ErrConfig) {
				t.Fatalf("err %v, want ErrConfig", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("err %v, want it to wrap %v", err, tc.also)
			}
			w, err := buf.NewWriter()
			if err != nil {
				t.Fatalf("rows not free after a refused construction: %v", err)
			}
			w.Close()
		})
	}
}

// TestMalformedTrajectory: a trajectory that does not fit is refused with
// ErrTrajectory and writes nothing.
func TestMalformedTrajectory(t *testing.T) {
	good := func() *driver.Trajectory {
		return trajectory([]tensorbuf.StepType{F, F}, []tensorbuf.StepType{M, M}, []int64{0, 0})
	}
	cases := []struct {
		name   string
		mutate func(*driver.Trajectory) *driver.Trajectory
	}{
		{"nil", func(*driver.Trajectory) *driver.Trajectory { return nil }},
		{"one row", func(*driver.Trajectory) *driver.Trajectory {
			return trajectory([]tensorbuf.StepType{F}, []tensorbuf.StepType{M}, []int64{0})
		}},
		{"short rewards", func(tr *driver.Trajectory) *driver.Trajectory { tr.Reward = tr.Reward[:1]; return tr }},
		{"bad step type", func(tr *driver.Trajectory) *driver.Trajectory { tr.StepType[1] = 7; return tr }},
		{"missing observation", func(tr *driver.Trajectory) *driver.Trajectory { delete(tr.Observation, "count"); return tr }},
		{"missing action", func(tr *driver.Trajectory) *driver.Trajectory { tr.Action = nil; return tr }},
		{"wrong dtype", func(tr *driver.Trajectory) *driver.Trajectory {
			tr.Observation["count"] = tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{0, 0}))
			return tr
		}},
		{"short active", func(tr *driver.Trajectory) *driver.Trajectory { tr.Active = []bool{true}; return tr }},
	}
	for name, mk := range constructors {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				buf := newBuffer(t, 2, 8, "q")
				o, err := mk(buf, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Observe(tc.mutate(good())); !errors.Is(err, observer.ErrTrajectory) {
					t.Fatalf("err %v, want ErrTrajectory", err)
				}
				if c0, c1 := buf.Cursor(0), buf.Cursor(1); c0 != 0 || c1 != 0 {
					t.Fatalf("cursors %d, %d after a refused step", c0, c1)
				}
				if s := o.Stats(); s.Steps != 0 {
					t.Fatalf("stats %+v after a refused step", s)
				}
			})
		}
	}
}

// TestRingNeverServesOverwrittenSteps: with a capacity barely above the
// sequence length, the ring overwrites the start of old items, which
// tensorbuf evicts; every item left holds consecutive stored steps.
func TestRingNeverServesOverwrittenSteps(t *testing.T) {
	buf := newBuffer(t, 2, 4, "q")
	o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 3})
	if err != nil {
		t.Fatal(err)
	}
	env := counting(t, 2, 5)
	runSteps(t, env, 20, o) // 10+ iterations on a ring of 4
	got := items(t, buf, "q")
	// Only the item starting at the oldest stored step (cursor-4) and the
	// newest one (cursor-3) survive.
	for _, v := range got {
		if v.Start < buf.Oldest(v.Row) {
			t.Errorf("%v starts before the oldest stored step %d", v, buf.Oldest(v.Row))
		}
		for k := 1; k < len(v.Count); k++ {
			if v.Count[k] != v.Count[k-1]+1 {
				t.Errorf("%v: steps not consecutive", v)
			}
		}
		if v.Count[0] != v.Start {
			t.Errorf("%v: count %d at position %d", v, v.Count[0], v.Start)
		}
	}
	if len(got) != 4 {
		t.Fatalf("items %q, want 2 per row", strs(got))
	}
	if s := o.Stats(); s.Items != 2*(s.Steps/2-2) {
		t.Errorf("stats %+v: want 1 item per step after the first 2 of each row", s)
	}
}

// TestRateLimitedInsertsStayPending: items whose insertion times out stay
// pending, Observe reports ErrInsert wrapping ErrRateLimited, and Flush
// inserts them once samples make room, in order.
func TestRateLimitedInsertsStayPending(t *testing.T) {
	buf := newBuffer(t, 1, 16)
	tb, err := buf.NewTable(tensorbuf.TableConfig{Name: "q", Selector: tensorbuf.FIFO,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: 1, Timeout: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	types := []tensorbuf.StepType{F, M, M, M}
	for k, st := range types {
		err := o.Observe(trajectory([]tensorbuf.StepType{st}, []tensorbuf.StepType{M}, []int64{int64(k)}))
		if k < 2 && err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		if k >= 2 && (!errors.Is(err, observer.ErrInsert) || !errors.Is(err, tensorbuf.ErrRateLimited)) {
			t.Fatalf("step %d: err %v, want ErrInsert and ErrRateLimited", k, err)
		}
	}
	if s := o.Stats(); s.Steps != 4 || s.Items != 2 || s.Pending != 2 {
		t.Fatalf("stats %+v, want 4 steps, 2 items, 2 pending", s)
	}
	sample := func(wantStart int64) {
		t.Helper()
		bt, err := tb.Sample(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if bt.Items[0].Start != wantStart {
			t.Fatalf("sampled start %d, want %d", bt.Items[0].Start, wantStart)
		}
		bt.Release()
	}
	sample(0)
	if err := o.Flush(); !errors.Is(err, tensorbuf.ErrRateLimited) {
		t.Fatalf("Flush: err %v, want ErrRateLimited for the last item", err)
	}
	if s := o.Stats(); s.Items != 3 || s.Pending != 1 {
		t.Fatalf("stats %+v, want 3 items, 1 pending", s)
	}
	sample(0)
	if err := o.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if s := o.Stats(); s.Items != 4 || s.Pending != 0 {
		t.Fatalf("stats %+v, want 4 items, 0 pending", s)
	}
	var starts []int64
	for _, v := range items(t, buf, "q") {
		starts = append(starts, v.Start)
	}
	if !slices.Equal(starts, []int64{0, 1, 2, 3}) {
		t.Fatalf("item starts %v, want [0 1 2 3]", starts)
	}
}

// TestCanceledContextKeepsItemsPending: an insertion under a canceled
// context stays pending; Close reports
// and drops it, and releases the rows all the same.
func TestCanceledContextKeepsItemsPending(t *testing.T) {
	buf := newBuffer(t, 1, 16)
	if _, err := buf.NewTable(tensorbuf.TableConfig{Name: "q", Selector: tensorbuf.FIFO,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, o, []tensorbuf.StepType{F, M}, 0) // two inserts need no wait
	cancel()
	err = o.Observe(trajectory([]tensorbuf.StepType{M}, []tensorbuf.StepType{M}, []int64{2}))
	if !errors.Is(err, observer.ErrInsert) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want ErrInsert wrapping context.Canceled", err)
	}
	if s := o.Stats(); s.Items != 2 || s.Pending != 1 || s.Steps != 3 {
		t.Fatalf("stats %+v, want 3 steps, 2 items, 1 pending", s)
	}
	if err := o.Close(); !errors.Is(err, observer.ErrInsert) {
		t.Fatalf("Close: err %v, want ErrInsert for the pending item", err)
	}
	if s := o.Stats(); s.Pending != 0 || s.Dropped != 1 {
		t.Fatalf("stats after Close %+v, want 0 pending, 1 dropped", s)
	}
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatalf("rows not released: %v", err)
	}
	w.Close()
}

// TestSequenceTablesAndPriority: every item goes to every table of a
// TrajectorySequence with the configured priority (1 by default);
// SetPriority applies to later items, 0 included.
func TestSequenceTablesAndPriority(t *testing.T) {
	for _, prio := range []float64{0, 2.5} {
		buf := newBuffer(t, 1, 16, "a", "b")
		o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"a", "b"}, SequenceLength: 2, Priority: prio})
		if err != nil {
			t.Fatal(err)
		}
		feed(t, o, []tensorbuf.StepType{F, M, M}, 0)
		if err := o.SetPriority(0); err != nil {
			t.Fatal(err)
		}
		feed(t, o, []tensorbuf.StepType{L}, 3)
		want := prio
		if want == 0 {
			want = 1
		}
		for _, table := range []string{"a", "b"} {
			got := items(t, buf, table)
			var ps []float64
			for _, v := range got {
				ps = append(ps, v.Priority)
			}
			if !slices.Equal(strs(got), []string{"0@0 [0F 1M]", "0@1 [1M 2M]", "0@2 [2M 3L]"}) || !slices.Equal(ps, []float64{want, want, 0}) {
				t.Errorf("priority %v: table %s: items %q priorities %v", prio, table, strs(got), ps)
			}
		}
		if err := o.SetPriority(math.Inf(1)); !errors.Is(err, observer.ErrConfig) {
			t.Errorf("SetPriority(+Inf): err %v, want ErrConfig", err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
