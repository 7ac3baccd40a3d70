package driver_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
)

func TestEpisodesPerRow(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		lengths   []int
		warmup    int // iterations of a step driver before the per-row run
		k         int
		maxIter   int
		types     []string // active step types observed per row
		firstSeen []int64  // count of each row's first active trajectory
		iters     int64
		steps     int64
		episodes  int64
	}{
		{name: "from reset", lengths: []int{1, 2, 5}, k: 2,
			types:     []string{"FLFL", "FMLFML", "FMMMMLFMMMML"},
			firstSeen: []int64{0, 0, 0}, iters: 12, steps: 16, episodes: 6},
		// After 2 iterations row 0 is at First, row 1 at Last, row 2 at Mid:
		// rows 1 and 2 wait for their next episode.
		{name: "resumed mid-episode", lengths: []int{1, 2, 5}, warmup: 2, k: 1,
			types:     []string{"FL", "FML", "FMMMML"},
			firstSeen: []int64{2, 3, 6}, iters: 10, steps: 8, episodes: 3},
		{name: "maximum iterations", lengths: []int{1, 2, 5}, k: 2, maxIter: 4,
			types:     []string{"FLFL", "FMLF", "FMMM"},
			firstSeen: []int64{0, 0, 0}, iters: 4, steps: 9, episodes: 3},
		// TF-Agents' rule would take 4 one-step episodes from row 0 and none
		// from row 1 (see TestShortEpisodeBias); per row, each gives 2.
		{name: "short and long", lengths: []int{1, 9}, k: 2,
			types:     []string{"FLFL", "FMMMMMMMMLFMMMMMMMML"},
			firstSeen: []int64{0, 0}, iters: 20, steps: 20, episodes: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := mustCounting(tc.lengths...)
			pol := newCountPolicy(env)
			var ts *driver.TimeStep
			var state any
			if tc.warmup > 0 {
				w, err := driver.NewStepDriver(env, pol, 1000, driver.WithMaxIterations(tc.warmup))
				if err != nil {
					t.Fatal(err)
				}
				if ts, state, err = w.Run(ctx, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			rec := &recorder{}
			inactive := 0
			check := driver.ObserverFunc(func(tr *driver.Trajectory) error {
				if len(tr.Active) != len(tc.lengths) {
					t.Fatalf("Active has length %d", len(tr.Active))
				}
				for r := range tr.Active {
					if !tr.IsActive(r) {
						inactive++
					}
				}
				return nil
			})
			d, err := driver.NewEpisodeDriver(env, pol, tc.k, driver.EpisodesPerRow(),
				driver.WithObservers(rec, check), driver.WithMaxIterations(tc.maxIter))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.Run(ctx, ts, state); err != nil {
				t.Fatal(err)
			}
			for r, want := range tc.types {
				if got := rec.types(r); got != want {
					t.Errorf("row %d: active step types %s, want %s", r, got, want)
				}
				if got := rec.rows[r][0].Count; got != tc.firstSeen[r] {
					t.Errorf("row %d: first active count %d, want %d", r, got, tc.firstSeen[r])
				}
			}
			want := driver.RunStats{Iterations: tc.iters, Steps: tc.steps, Episodes: tc.episodes}
			if got := d.Stats(); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
			if wantInactive := int(tc.iters)*len(tc.lengths) - int(tc.steps+tc.episodes); inactive != wantInactive {
				t.Errorf("%d inactive row steps, want %d", inactive, wantInactive)
			}
		})
	}
}

// TestShortEpisodeBias shows TF-Agents' rule over batched environments:
// four episodes summed over rows all come from the row with short ones.
func TestShortEpisodeBias(t *testing.T) {
	env := mustCounting(1, 9)
	rec := &recorder{}
	d, err := driver.NewEpisodeDriver(env, newCountPolicy(env), 4, driver.WithObservers(rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := []string{rec.types(0), rec.types(1)}; !reflect.DeepEqual(got, []string{"FLFLFLFL", "FMMMMMMM"}) {
		t.Errorf("step types %v", got)
	}
}

// TestEpisodesPerRowCartPole: every row of a randomly driven CartPole gives
// exactly k complete episodes, each F, M..., L then the boundary.
func TestEpisodesPerRowCartPole(t *testing.T) {
	const rows, k = 8, 3
	env, err := envs.NewCartPole(rows, 1)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), 2)
	if err != nil {
		t.Fatal(err)
	}
	types := make([][]tensorbuf.StepType, rows)
	obs := driver.ObserverFunc(func(tr *driver.Trajectory) error {
		for r := range tr.StepType {
			if tr.IsActive(r) {
				types[r] = append(types[r], tr.StepType[r])
			}
		}
		return nil
	})
	d, err := driver.NewEpisodeDriver(env, pol, k, driver.EpisodesPerRow(), driver.WithObservers(obs))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	var total int64
	for r, ts := range types {
		episodes, start := 0, 0
		for i, st := range ts {
			if st != tensorbuf.Last {
				continue
			}
			ep := ts[start : i+1] // F M ... M L(boundary)
			if len(ep) < 3 || ep[0] != tensorbuf.First {
				t.Errorf("row %d: episode %d has step types %v", r, episodes, ep)
			}
			for _, m := range ep[1 : len(ep)-1] {
				if m != tensorbuf.Mid {
					t.Errorf("row %d: episode %d has step types %v", r, episodes, ep)
					break
				}
			}
			episodes++
			start = i + 1
		}
		if episodes != k || start != len(ts) {
			t.Errorf("row %d: %d episodes, %d trailing steps; want %d, 0", r, episodes, len(ts)-start, k)
		}
		total += int64(len(ts))
	}
	if s := d.Stats(); s.Episodes != rows*k || s.Steps+s.Episodes != total {
		t.Errorf("stats %+v, %d active trajectories", s, total)
	}
}
