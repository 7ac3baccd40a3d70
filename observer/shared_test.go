package observer_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// memberKind is one kind of item-creating observer used in the Shared
// tests, with the tables it fills.
type memberKind struct {
	name   string
	tables []string
	// make creates the observer on buf, in group g when g is not nil.
	make func(t testing.TB, buf *tensorbuf.Buffer, g *observer.Shared) observerLike
}

// observerLike is what the tests need of every item-creating observer.
type observerLike interface {
	driver.Observer
	Reset(bool) error
	Close() error
	Open() error
	Stats() observer.Stats
	Cached() []int64
}

// result holds a constructor's results: must(f()).get(t) fails the test
// on an error.
type result[T any] struct {
	v   T
	err error
}

func must[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) get(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

var (
	episodeKind = memberKind{"AddEpisode", []string{"ep"}, func(t testing.TB, buf *tensorbuf.Buffer, g *observer.Shared) observerLike {
		cfg := observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 8}
		if g != nil {
			return must(g.NewAddEpisode(cfg)).get(t)
		}
		return must(observer.NewAddEpisode(buf, cfg)).get(t)
	}}
	sequenceKind = memberKind{"TrajectorySequence", []string{"seq"}, func(t testing.TB, buf *tensorbuf.Buffer, g *observer.Shared) observerLike {
		cfg := observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 3, Stride: 2, PadEndOfEpisodes: true}
		if g != nil {
			return must(g.NewTrajectorySequence(cfg)).get(t)
		}
		return must(observer.NewTrajectorySequence(buf, cfg)).get(t)
	}}
	addTrajectoryKind = memberKind{"AddTrajectory", []string{"at4", "at2"}, func(t testing.TB, buf *tensorbuf.Buffer, g *observer.Shared) observerLike {
		cfg := observer.AddTrajectoryConfig{Tables: []observer.TableSequence{
			{Table: "at4", SequenceLength: 4}, {Table: "at2", SequenceLength: 2, Stride: 2}},
			PadEndOfEpisodes: true, TileEndOfEpisodes: true}
		if g != nil {
			return must(g.NewAddTrajectory(cfg)).get(t)
		}
		return must(observer.NewAddTrajectory(buf, cfg)).get(t)
	}}
)

// TestSharedMatchesLoneObservers: two and three observers of different
// kinds over the same rows, fed through one Shared group, create exactly
// the items (rows, starts, lengths, pads, priorities and every stored
// value) that each creates alone on its own buffer from the same
// collection, and the steps are stored once.
func TestSharedMatchesLoneObservers(t *testing.T) {
	lengths := []int{2, 3, 5}
	for _, tc := range []struct {
		name  string
		kinds []memberKind
	}{
		{"episode+sequence", []memberKind{episodeKind, sequenceKind}},
		{"sequence+addtrajectory", []memberKind{sequenceKind, addTrajectoryKind}},
		{"episode+sequence+addtrajectory", []memberKind{episodeKind, sequenceKind, addTrajectoryKind}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all []string
			for _, k := range tc.kinds {
				all = append(all, k.tables...)
			}
			shared := newBuffer(t, len(lengths), 64, all...)
			g := must(observer.NewShared(shared, observer.SharedConfig{})).get(t)
			members := make([]observerLike, len(tc.kinds))
			for i, k := range tc.kinds {
				members[i] = k.make(t, shared, g)
			}
			runSteps(t, counting(t, lengths...), 40, g)
			if err := g.Reset(true); err != nil {
				t.Fatal(err)
			}
			for i, k := range tc.kinds {
				lone := newBuffer(t, len(lengths), 64, k.tables...)
				o := k.make(t, lone, nil)
				runSteps(t, counting(t, lengths...), 40, o)
				if err := o.Reset(true); err != nil {
					t.Fatal(err)
				}
				if got, want := members[i].Stats(), o.Stats(); got != want {
					t.Errorf("%s: member stats %+v, lone %+v", k.name, got, want)
				}
				for _, tb := range k.tables {
					got, want := items(t, shared, tb), items(t, lone, tb)
					if len(want) < 5 {
						t.Fatalf("%s table %s: only %d items: the test shows little", k.name, tb, len(want))
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s table %s:\nshared %q\nlone   %q", k.name, tb, strs(got), strs(want))
					}
				}
				if lone.Size() != shared.Size() {
					t.Errorf("%s: lone buffer holds %d steps, the shared one %d", k.name, lone.Size(), shared.Size())
				}
			}
			st := g.Stats()
			if st.Steps != shared.Size() {
				t.Errorf("group wrote %d steps, the buffer holds %d", st.Steps, shared.Size())
			}
			var items int64
			for _, m := range members {
				items += m.Stats().Items
			}
			if st.Items != items {
				t.Errorf("group counts %d items, members %d", st.Items, items)
			}
		})
	}
}

// TestSharedSequenceItemsExact pins a two-observer group on a hand-fed
// row: an episode table and a sequence table from the same steps.
func TestSharedSequenceItemsExact(t *testing.T) {
	buf := newBuffer(t, 1, 32, "ep", "seq")
	g := must(observer.NewShared(buf, observer.SharedConfig{})).get(t)
	must(g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 8})).get(t)
	must(g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 3, Stride: 2})).get(t)
	feed(t, g, []tensorbuf.StepType{F, M, L, F, M, M, L, F}, 0)
	if got, want := strs(items(t, buf, "ep")), []string{"0@0 [0F 1M 2L P]", "0@3 [3F 4M 5M 6L]"}; !slices.Equal(got, want) {
		t.Errorf("episodes %q, want %q", got, want)
	}
	if got, want := strs(items(t, buf, "seq")), []string{"0@0 [0F 1M 2L]", "0@2 [2L 3F 4M]", "0@4 [4M 5M 6L]"}; !slices.Equal(got, want) {
		t.Errorf("sequences %q, want %q", got, want)
	}
	if buf.Cursor(0) != 8 {
		t.Errorf("cursor %d, want 8: each step stored once", buf.Cursor(0))
	}
}

// TestSharedEpisodeOverflow: an AddEpisode member skips episodes longer
// than its maximum exactly as alone (same items, same values), while the
// steps stay stored for the other members.
func TestSharedEpisodeOverflow(t *testing.T) {
	lengths := []int{2, 4}
	shared := newBuffer(t, 2, 64, "ep", "seq")
	g := must(observer.NewShared(shared, observer.SharedConfig{})).get(t)
	ep := must(g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 4, BypassPartialEpisodes: true})).get(t)
	must(g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 2})).get(t)
	runSteps(t, counting(t, lengths...), 20, g)

	lone := newBuffer(t, 2, 64, "ep")
	o := must(observer.NewAddEpisode(lone, observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 4, BypassPartialEpisodes: true})).get(t)
	runSteps(t, counting(t, lengths...), 20, o)

	content := func(vs []view) []string {
		var out []string
		for _, v := range vs {
			out = append(out, fmt.Sprint(v.Row, v.Len, v.Pad, v.Count, v.StepType, v.Reward, v.Mask))
		}
		return out
	}
	got, want := content(items(t, shared, "ep")), content(items(t, lone, "ep"))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("episodes:\nshared %q\nlone   %q", got, want)
	}
	if s, l := ep.Stats().SkippedEpisodes, o.Stats().SkippedEpisodes; s != l || s == 0 {
		t.Errorf("skipped episodes: shared %d, lone %d", s, l)
	}
	// Row 1's episodes (5 steps with the boundary) are all stored in the
	// shared buffer: the sequence table holds windows over them.
	if shared.Cursor(1) <= lone.Cursor(1) {
		t.Errorf("row 1 cursors: shared %d, lone %d: the overflowing steps must stay stored", shared.Cursor(1), lone.Cursor(1))
	}
}

func TestSharedLifecycleAndMisuse(t *testing.T) {
	buf := newBuffer(t, 2, 32, "ep", "seq")
	g := must(observer.NewShared(buf, observer.SharedConfig{})).get(t)
	ep := must(g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 8})).get(t)
	seq := must(g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 2})).get(t)
	tr := trajectory([]tensorbuf.StepType{F, F}, []tensorbuf.StepType{M, M}, []int64{0, 0})

	if err := seq.Observe(tr); !errors.Is(err, observer.ErrShared) {
		t.Errorf("member Observe: %v, want ErrShared", err)
	}
	if buf.Cursor(0) != 0 {
		t.Fatal("a member's refused Observe wrote a step")
	}
	if _, err := g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 2, Rows: []int{1}}); !errors.Is(err, observer.ErrConfig) {
		t.Errorf("member with other rows: %v, want ErrConfig", err)
	}
	if _, err := observer.NewShared(buf, observer.SharedConfig{Rows: []int{1}}); !errors.Is(err, tensorbuf.ErrRowOwned) {
		t.Errorf("second group on the rows: %v, want ErrRowOwned", err)
	}
	if _, err := observer.NewAddEpisode(buf, observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 8}); !errors.Is(err, tensorbuf.ErrRowOwned) {
		t.Errorf("lone observer on the group's rows: %v, want ErrRowOwned", err)
	}
	// A closed member receives no step; reopened, it starts afresh.
	if err := g.Observe(tr); err != nil {
		t.Fatal(err)
	}
	if err := seq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Observe(trajectory([]tensorbuf.StepType{M, M}, []tensorbuf.StepType{M, M}, []int64{1, 1})); err != nil {
		t.Fatal(err)
	}
	if c := seq.Cached(); !slices.Equal(c, []int64{0, 0}) {
		t.Errorf("closed member cached %v", c)
	}
	if c := ep.Cached(); !slices.Equal(c, []int64{2, 2}) {
		t.Errorf("episode member cached %v, want [2 2]", c)
	}
	if err := seq.Open(); err != nil {
		t.Fatal(err)
	}
	for k := int64(2); k < 4; k++ {
		if err := g.Observe(trajectory([]tensorbuf.StepType{M, M}, []tensorbuf.StepType{M, M}, []int64{k, k})); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strs(items(t, buf, "seq")), []string{"0@2 [2M 3M]", "1@2 [2M 3M]"}; !slices.Equal(got, want) {
		t.Errorf("sequences after reopening %q, want %q", got, want)
	}
	// Closing the group closes the members and frees the rows.
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Observe(tr); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("Observe on a closed group: %v", err)
	}
	if err := ep.Reset(true); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("member Reset on a closed group: %v", err)
	}
	if err := ep.Open(); !errors.Is(err, observer.ErrClosed) {
		t.Errorf("member Open on a closed group: %v, want ErrClosed", err)
	}
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatalf("rows not released by Close: %v", err)
	}
	if err := g.Open(); !errors.Is(err, tensorbuf.ErrRowOwned) {
		t.Errorf("Open with the rows taken: %v", err)
	}
	_ = w.Close()
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	if err := g.Observe(trajectory([]tensorbuf.StepType{F, F}, []tensorbuf.StepType{L, L}, []int64{9, 9})); err != nil {
		t.Fatal(err)
	}
	if c := ep.Cached(); !slices.Equal(c, []int64{1, 1}) {
		t.Errorf("episode member after reopening the group: cached %v, want [1 1]", c)
	}
}

// TestDataSpecRefusesMissingField: a buffer without a field the
// trajectories carry is refused when the observer is created.
func TestDataSpecRefusesMissingField(t *testing.T) {
	env := counting(t, 3)
	spec := observer.DataSpec(env, nil)
	full := newBuffer(t, 1, 8, "q")
	if _, err := observer.NewTrajectorySequence(full, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 2, DataSpec: spec}); err != nil {
		t.Fatalf("buffer with every field: %v", err)
	}
	var fields []tensorbuf.Field
	for _, f := range countingFields(t) {
		if f.Name != envs.EpisodeStepName {
			fields = append(fields, f)
		}
	}
	lacking, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 8, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer lacking.Close()
	if _, err := lacking.NewTable(tensorbuf.TableConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for name, mk := range map[string]func() error{
		"TrajectorySequence": func() error {
			_, err := observer.NewTrajectorySequence(lacking, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 2, DataSpec: spec})
			return err
		},
		"AddTrajectory": func() error {
			_, err := observer.NewAddTrajectory(lacking, observer.AddTrajectoryConfig{Tables: []observer.TableSequence{{Table: "q", SequenceLength: 2}}, DataSpec: spec})
			return err
		},
		"AddEpisode": func() error {
			_, err := observer.NewAddEpisode(lacking, observer.AddEpisodeConfig{Tables: []string{"q"}, MaxSequenceLength: 4, DataSpec: spec})
			return err
		},
		"Shared": func() error {
			_, err := observer.NewShared(lacking, observer.SharedConfig{DataSpec: spec})
			return err
		},
	} {
		if err := mk(); !errors.Is(err, observer.ErrConfig) {
			t.Errorf("%s on a buffer without %q: %v, want ErrConfig", name, envs.EpisodeStepName, err)
		}
	}
	// Without a DataSpec the field is dropped, as documented.
	if _, err := observer.NewAddEpisode(lacking, observer.AddEpisodeConfig{Tables: []string{"q"}, MaxSequenceLength: 4}); err != nil {
		t.Fatal(err)
	}
	// A dtype that differs is refused too.
	bad := slices.Clone(spec)
	bad[0].DType = tensorbuf.Float32
	if _, err := observer.NewShared(full, observer.SharedConfig{DataSpec: bad, Rows: []int{0}}); !errors.Is(err, observer.ErrConfig) {
		t.Errorf("dtype mismatch: %v, want ErrConfig", err)
	}
}

// TestSharedConcurrentReads: members' Stats, Cached and SetPriority run
// while the group observes (run under -race).
func TestSharedConcurrentReads(t *testing.T) {
	buf := newBuffer(t, 2, 64, "ep", "seq")
	g := must(observer.NewShared(buf, observer.SharedConfig{})).get(t)
	ep := must(g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"ep"}, MaxSequenceLength: 8})).get(t)
	seq := must(g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"seq"}, SequenceLength: 2})).get(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			_ = ep.Stats()
			_ = seq.Cached()
			_ = g.Stats()
			_ = seq.SetPriority(2)
		}
	}()
	runSteps(t, counting(t, 3, 4), 60, g)
	<-done
	if st := g.Stats(); st.Items != ep.Stats().Items+seq.Stats().Items || st.Items == 0 {
		t.Fatalf("group stats %+v", st)
	}
}
