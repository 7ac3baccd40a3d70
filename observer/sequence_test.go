package observer_test

import (
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// TestIssueAddTrajectoryCounts is the issue's case: Counting episodes of 3
// steps (F, M, M, L, then the boundary), one env row, a step driver of
// num_steps = 4, which observes 5 trajectories (t0..t4, t3 being the
// boundary).
func TestIssueAddTrajectoryCounts(t *testing.T) {
	cases := []struct {
		name   string
		tables []observer.TableSequence
		want   map[string][]string
	}{
		{
			name:   "length 2",
			tables: []observer.TableSequence{{Table: "a", SequenceLength: 2}},
			want:   map[string][]string{"a": {"0@0 [0F 1M]", "0@1 [1M 2M]", "0@2 [2M 3L]"}},
		},
		{
			name:   "length 2 stride 2",
			tables: []observer.TableSequence{{Table: "a", SequenceLength: 2, Stride: 2}},
			want:   map[string][]string{"a": {"0@0 [0F 1M]", "0@2 [2M 3L]"}},
		},
		{
			name:   "two tables of lengths 2 and 3",
			tables: []observer.TableSequence{{Table: "a", SequenceLength: 2}, {Table: "b", SequenceLength: 3}},
			want: map[string][]string{
				"a": {"0@0 [0F 1M]", "0@1 [1M 2M]", "0@2 [2M 3L]"},
				"b": {"0@0 [0F 1M 2M]", "0@1 [1M 2M 3L]"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := newBuffer(t, 1, 16, "a", "b")
			o, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{Tables: tc.tables})
			if err != nil {
				t.Fatal(err)
			}
			stats := runSteps(t, counting(t, 3), 4, o)
			if stats.Iterations != 5 || stats.Steps != 4 || stats.Episodes != 1 {
				t.Fatalf("driver stats %+v, want 5 iterations, 4 steps, 1 episode", stats)
			}
			if s := o.Stats(); s.Steps != 5 {
				t.Errorf("observer wrote %d steps, want 5", s.Steps)
			}
			total := 0
			for table, want := range tc.want {
				got := strs(items(t, buf, table))
				if !slices.Equal(got, want) {
					t.Errorf("table %s: items %q, want %q", table, got, want)
				}
				total += len(want)
			}
			if s := o.Stats(); s.Items != int64(total) || s.Pending != 0 {
				t.Errorf("stats %+v, want %d items and none pending", s, total)
			}
			// The boundary reset the cache; t4 (count 4) started a new one.
			if got := o.Cached(); !slices.Equal(got, []int64{1}) {
				t.Errorf("cached %v, want [1]", got)
			}
		})
	}
}

// TestSeedPadding is the example of TF-Agents' tile_end_of_episodes
// documentation: a 3-step episode F, M, L (L the
// boundary) with sequence length 4 gives [F M L P] untiled and
// [F M L P] [M L P P] [L P P P] tiled, with AddTrajectory at the boundary
// and with TrajectorySequence on Reset(true).
func TestSeedPadding(t *testing.T) {
	untiled := []string{"0@0 [0F 1M 2L P]"}
	tiled := []string{"0@0 [0F 1M 2L P]", "0@1 [1M 2L P P]", "0@2 [2L P P P]"}
	cases := []struct {
		name      string
		sequence  bool
		pad, tile bool
		want      []string
	}{
		{"add trajectory untiled", false, true, false, untiled},
		{"add trajectory tiled", false, true, true, tiled},
		{"add trajectory no padding", false, false, false, nil},
		{"sequence untiled", true, true, false, untiled},
		{"sequence tiled", true, true, true, tiled},
		{"sequence no padding", true, false, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := newBuffer(t, 1, 8, "q")
			env := counting(t, 2) // F, M, L, then the boundary
			var obs interface {
				Observe(*driver.Trajectory) error
				Reset(bool) error
			}
			if tc.sequence {
				o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{
					Tables: []string{"q"}, SequenceLength: 4, PadEndOfEpisodes: tc.pad, TileEndOfEpisodes: tc.tile})
				if err != nil {
					t.Fatal(err)
				}
				obs = o
			} else {
				o, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
					Tables: []observer.TableSequence{{Table: "q", SequenceLength: 4}}, PadEndOfEpisodes: tc.pad, TileEndOfEpisodes: tc.tile})
				if err != nil {
					t.Fatal(err)
				}
				obs = o
			}
			// An episode driver of one episode observes t0 (F), t1 (M) and
			// the boundary t2 (L).
			if s := runEpisodes(t, env, 1, obs); s.Iterations != 3 {
				t.Fatalf("driver took %d iterations, want 3", s.Iterations)
			}
			if tc.sequence {
				if got := items(t, buf, "q"); len(got) != 0 {
					t.Fatalf("sequence observer wrote %q before Reset", strs(got))
				}
				if err := obs.Reset(true); err != nil {
					t.Fatal(err)
				}
			}
			got := items(t, buf, "q")
			if !slices.Equal(strs(got), tc.want) {
				t.Fatalf("items %q, want %q", strs(got), tc.want)
			}
			checkPads(t, got)
			for k, v := range got {
				if v.Len != 3-k || v.Pad != 1+k {
					t.Errorf("item %d: Len %d Pad %d, want %d and %d", k, v.Len, v.Pad, 3-k, 1+k)
				}
			}
			if len(got) > 0 {
				// Real steps keep their next step types and discounts: the
				// M->L step has discount 0 (termination), the boundary 1.
				v := got[0]
				if !slices.Equal(v.NextType, []tensorbuf.StepType{M, L, F, F}) || !slices.Equal(v.Discount, []float32{1, 0, 1, 0}) ||
					!slices.Equal(v.Reward, []float32{0, 1, 0, 0}) {
					t.Errorf("item 0: next types %v, discounts %v, rewards %v", v.NextType, v.Discount, v.Reward)
				}
			}
		})
	}
}

// TestMultiRowAddTrajectory: rows with episodes of 1 and 2 steps (F, L /
// F, M, L) end episodes at different iterations; items are inserted per
// step in batch-row order.
func TestMultiRowAddTrajectory(t *testing.T) {
	cases := []struct {
		name      string
		length    int
		pad, tile bool
		want      []string
	}{
		{"length 2", 2, false, false, []string{
			"0@0 [0F 1L]", "1@0 [0F 1M]", // iteration 1
			"1@1 [1M 2L]", // iteration 2
			"0@2 [2F 3L]", // iteration 3
		}},
		{"length 3 padded", 3, true, false, []string{
			"0@0 [0F 1L P]",  // iteration 1: row 0's boundary
			"1@0 [0F 1M 2L]", // iteration 2: full window, no pad needed
			"0@2 [2F 3L P]",  // iteration 3
		}},
		{"length 3 tiled", 3, true, true, []string{
			"0@0 [0F 1L P]", "0@1 [1L P P]",
			"1@0 [0F 1M 2L]", "1@1 [1M 2L P]", "1@2 [2L P P]",
			"0@2 [2F 3L P]", "0@3 [3L P P]",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := newBuffer(t, 2, 16, "q")
			o, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
				Tables: []observer.TableSequence{{Table: "q", SequenceLength: tc.length}}, PadEndOfEpisodes: tc.pad, TileEndOfEpisodes: tc.tile})
			if err != nil {
				t.Fatal(err)
			}
			// Row 0: F L F L (t1, t3 boundaries); row 1: F M L F (t2 boundary).
			env := counting(t, 1, 2)
			d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(o), driver.WithMaxIterations(4))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.Run(t.Context(), nil, nil); err != nil {
				t.Fatal(err)
			}
			got := items(t, buf, "q")
			if !slices.Equal(strs(got), tc.want) {
				t.Fatalf("items %q, want %q", strs(got), tc.want)
			}
			checkPads(t, got)
			if c := o.Cached(); !slices.Equal(c, []int64{0, 1}) {
				t.Errorf("cached %v, want [0 1]", c)
			}
			if c0, c1 := buf.Cursor(0), buf.Cursor(1); c0 != 4 || c1 != 4 {
				t.Errorf("cursors %d, %d, want 4, 4", c0, c1)
			}
		})
	}
}

// TestSequenceAcrossEpisodes: TrajectorySequence windows run across
// boundaries, rows keep separate counts, and Reset(false) drops the
// caches so that the next window starts after it.
func TestSequenceAcrossEpisodes(t *testing.T) {
	buf := newBuffer(t, 2, 32, "s3", "s3x2")
	o, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"s3"}, SequenceLength: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil { // release the rows for the strided one
		t.Fatal(err)
	}
	o2, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"s3x2"}, SequenceLength: 3, Stride: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Row 0: F M L F M L ...; row 1: F L F L ...
	env := counting(t, 2, 1)
	d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(o2), driver.WithMaxIterations(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0@0 [0F 1M 2L]", "1@0 [0F 1L 2F]", // cached 3
		"0@2 [2L 3F 4M]", "1@2 [2F 3L 4F]", // cached 5
	}
	if got := strs(items(t, buf, "s3x2")); !slices.Equal(got, want) {
		t.Fatalf("items %q, want %q", got, want)
	}
	if err := o2.Reset(false); err != nil {
		t.Fatal(err)
	}
	if c := o2.Cached(); !slices.Equal(c, []int64{0, 0}) {
		t.Fatalf("cached after Reset(false): %v", c)
	}
	// Three more iterations: positions 5, 6, 7 make one window per row.
	d2, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(o2), driver.WithMaxIterations(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d2.Run(t.Context(), env.Current(), nil); err != nil {
		t.Fatal(err)
	}
	want = append(want, "0@5 [5L 6F 7M]", "1@5 [5L 6F 7L]")
	if got := strs(items(t, buf, "s3x2")); !slices.Equal(got, want) {
		t.Fatalf("items after Reset(false) %q, want %q", got, want)
	}
	if got := items(t, buf, "s3"); len(got) != 0 {
		t.Fatalf("closed observer's table got %q", strs(got))
	}
}
