package tensorbuf_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// The tiny goal environment of these tests: a walker on a line whose
// observation "obs" is [position, goal, marker]. The achieved goal is
// element 0, the desired goal element 1; marker is 100+t, to check that
// relabeling touches the goal only. The reward is 0 when the position
// equals the goal and -1 otherwise, and reaching the goal terminates.
var goalFields = []tensorbuf.Field{
	{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
	{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int32},
}

func lineReward(ach, des []float64) float32 {
	if ach[0] == des[0] {
		return 0
	}
	return -1
}

func lineDone(ach, des []float64) bool { return ach[0] == des[0] }

// goalStep is one stored step of the line walker.
type goalStep struct {
	st, next  tensorbuf.StepType
	pos, goal float32
	reward    float32
	discount  float32
}

// lineSteps is row 0's history:
//
//	episode 1, steps 0-2, goal 9, truncated at step 2 (final obs: step 3, pos 3)
//	episode 2, steps 4-5, goal 12, reached at step 5 (final obs: step 6, pos 12)
//	episode 3, steps 7-8, goal 30, still running
var lineSteps = func() []goalStep {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	return []goalStep{
		{F, M, 0, 9, -1, 1},
		{M, M, 1, 9, -1, 1},
		{M, L, 2, 9, -1, 1}, // truncated: Last with discount 1
		{L, F, 3, 9, 0, 1},  // boundary: episode 1's final observation
		{F, M, 10, 12, -1, 1},
		{M, L, 11, 12, 0, 0}, // reaches the goal: terminated
		{L, F, 12, 12, 0, 1},
		{F, M, 20, 30, -1, 1},
		{M, M, 21, 30, -1, 1},
	}
}()

// newGoalBuffer returns a one-row buffer holding steps, and the writer
// that owns its row.
func newGoalBuffer(t testing.TB, be tensorbuf.Backend, capacity int, steps []goalStep) (*tensorbuf.Buffer, *tensorbuf.Writer) {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: capacity, Fields: goalFields, Seed: 2, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		addGoalStep(t, w, int64(i), s)
	}
	return b, w
}

func addGoalStep(t testing.TB, w *tensorbuf.Writer, pos int64, s goalStep) {
	t.Helper()
	err := w.Add(&tensorbuf.Step{
		StepType: []tensorbuf.StepType{s.st}, NextStepType: []tensorbuf.StepType{s.next},
		Reward: []float32{s.reward}, Discount: []float32{s.discount},
		Values: map[string]*tensor.Dense{
			"obs": tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{s.pos, s.goal, float32(100 + pos)})),
			"act": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{int32(pos)})),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lineConfig(s tensorbuf.GoalStrategy, k int, mode tensorbuf.RelabelMode) tensorbuf.HindsightConfig {
	return tensorbuf.HindsightConfig{
		AchievedGoal: tensorbuf.GoalRef{Field: "obs", Indices: []int{0}},
		DesiredGoal:  tensorbuf.GoalRef{Field: "obs", Indices: []int{1}},
		Reward:       lineReward, IsDone: lineDone,
		Strategy: s, NumGoals: k, Mode: mode, Seed: 5,
	}
}

// hsExp is one exported or sampled transition as the tests read it.
type hsExp struct {
	step                 int64
	relabeled            bool
	goal, nextGoal       float64
	reward, discount     float64
	done                 float64
	pos, nextPos, marker float64
}

func readHindsight(t testing.TB, tr *tensorbuf.Transitions, relabeled []bool) []hsExp {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	obs, next := floats(t, h.Observation["obs"]), floats(t, h.NextObservation["obs"])
	rew, disc, done := floats(t, h.Reward), floats(t, h.Discount), floats(t, h.IsDone)
	out := make([]hsExp, len(h.Steps))
	for i, s := range h.Steps {
		out[i] = hsExp{
			step: s, relabeled: relabeled[i], goal: obs[3*i+1], nextGoal: next[3*i+1],
			reward: rew[i], discount: disc[i], done: done[i],
			pos: obs[3*i], nextPos: next[3*i], marker: obs[3*i+2],
		}
	}
	return out
}

// real returns the expected real transition at step s of lineSteps.
func realLine(s int64) hsExp {
	g := lineSteps[s]
	done := 0.0
	if g.next == tensorbuf.Last {
		done = 2
		if g.discount == 0 {
			done = 1
		}
	}
	return hsExp{step: s, goal: float64(g.goal), nextGoal: float64(lineSteps[s+1].goal), reward: float64(g.reward),
		discount: float64(g.discount), done: done, pos: float64(g.pos), nextPos: float64(lineSteps[s+1].pos), marker: float64(100 + s)}
}

// relabeledLine returns the expected relabeled transition at step s with
// goal g.
func relabeledLine(s int64, g float64) hsExp {
	e := realLine(s)
	e.relabeled, e.goal, e.nextGoal = true, g, g
	e.reward, e.discount = -1, 1
	switch {
	case e.nextPos == g:
		e.reward, e.discount, e.done = 0, 0, 1
	case e.done == 2:
	default:
		e.done = 0
	}
	return e
}

func TestHindsightEpisodeEndFinalExact(t *testing.T) {
	for _, be := range nstepBackends {
		t.Run(be.name, func(t *testing.T) {
			b, _ := newGoalBuffer(t, be.be(), 16, lineSteps)
			hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 4, tensorbuf.RelabelAtEpisodeEnd))
			if err != nil {
				t.Fatal(err)
			}
			n, err := hs.Generate()
			if err != nil || n != 5 {
				t.Fatalf("Generate = %d, %v; want 5 (one final goal for each of 5 transitions of 2 ended episodes)", n, err)
			}
			if n, err := hs.Generate(); n != 0 || err != nil {
				t.Fatalf("second Generate = %d, %v; want nothing new", n, err)
			}
			exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
			if err != nil {
				t.Fatal(err)
			}
			got := readHindsight(t, exp[0], rel)
			want := []hsExp{
				realLine(0), relabeledLine(0, 3), // goal 3: episode 1's final position
				realLine(1), relabeledLine(1, 3),
				realLine(2), relabeledLine(2, 3), // truncated, relabeled as reached: terminated
				realLine(4), relabeledLine(4, 12),
				realLine(5), relabeledLine(5, 12),
				realLine(7), // episode 3 is running: nothing relabeled
			}
			if !slices.Equal(got, want) {
				t.Fatalf("export\n got %+v\nwant %+v", got, want)
			}
			// Hand-checked: step 2 relabeled with its own next position.
			if w := want[5]; w.reward != 0 || w.done != 1 || w.discount != 0 || w.goal != 3 {
				t.Fatalf("model: %+v", w)
			}
		})
	}
}

func TestHindsightEpisodeEndStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy tensorbuf.GoalStrategy
		// goals lists, per step, the goals the strategy may choose.
		goals map[int64][]float64
	}{
		{tensorbuf.GoalFinal, map[int64][]float64{0: {3}, 1: {3}, 2: {3}, 4: {12}, 5: {12}}},
		{tensorbuf.GoalFuture, map[int64][]float64{0: {1, 2, 3}, 1: {2, 3}, 2: {3}, 4: {11, 12}, 5: {12}}},
		{tensorbuf.GoalEpisode, map[int64][]float64{0: {1, 2, 3}, 1: {1, 2, 3}, 2: {1, 2, 3}, 4: {11, 12}, 5: {11, 12}}},
		{tensorbuf.GoalRandom, nil},
	} {
		t.Run(tc.strategy.String(), func(t *testing.T) {
			b, _ := newGoalBuffer(t, nil, 16, lineSteps)
			const k = 40
			hs, err := tensorbuf.NewHindsight(b, lineConfig(tc.strategy, k, tensorbuf.RelabelAtEpisodeEnd))
			if err != nil {
				t.Fatal(err)
			}
			n, err := hs.Generate()
			per := k
			if tc.strategy == tensorbuf.GoalFinal {
				per = 1
			}
			if err != nil || n != 5*per {
				t.Fatalf("Generate = %d, %v; want %d", n, err, 5*per)
			}
			if hs.Stored() != n {
				t.Fatalf("Stored %d, want %d", hs.Stored(), n)
			}
			exp, rel, err := hs.AllExperiences(tensorbuf.ExportNone)
			if err != nil {
				t.Fatal(err)
			}
			if len(exp) != 6+n {
				t.Fatalf("%d experiences, want 6 real and %d relabeled", len(exp), n)
			}
			seen := map[int64]map[float64]bool{}
			for i, e := range exp {
				x := readHindsight(t, e, rel[i:i+1])[0]
				if !x.relabeled {
					if x != realLine(x.step) {
						t.Fatalf("real %+v, want %+v", x, realLine(x.step))
					}
					continue
				}
				choices := tc.goals[x.step]
				if tc.strategy == tensorbuf.GoalRandom {
					// Any stored position: 0-3, 10-12, 20, 21.
					choices = []float64{0, 1, 2, 3, 10, 11, 12, 20, 21}
				}
				if !slices.Contains(choices, x.goal) {
					t.Fatalf("step %d relabeled with goal %v, not among %v", x.step, x.goal, choices)
				}
				if want := relabeledLine(x.step, x.goal); x != want {
					t.Fatalf("relabeled %+v, want %+v", x, want)
				}
				if seen[x.step] == nil {
					seen[x.step] = map[float64]bool{}
				}
				seen[x.step][x.goal] = true
			}
			// With 40 goals per transition every choice shows up (a
			// missing one has probability below 40 * (8/9)^40 < 0.4%
			// for the largest set, and the seed is fixed).
			for s, choices := range tc.goals {
				for _, g := range choices {
					if !seen[s][g] {
						t.Fatalf("step %d never relabeled with goal %v (saw %v)", s, g, seen[s])
					}
				}
			}
			if tc.strategy == tensorbuf.GoalRandom && len(seen[0]) < 7 {
				t.Fatalf("random goals of step 0: %v", seen[0])
			}
		})
	}
}

// TestHindsightGenerateIncremental finishes an episode after a first
// Generate and checks that only the new episode is relabeled, and that
// relabeled experiences leave with their step when the ring wraps.
func TestHindsightGenerateIncremental(t *testing.T) {
	b, writer := newGoalBuffer(t, nil, 10, nil)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range lineSteps[:3] {
		addGoalStep(t, writer, int64(i), s)
	}
	if n, err := hs.Generate(); n != 0 || err != nil {
		t.Fatalf("Generate before the final observation = %d, %v", n, err)
	}
	addGoalStep(t, writer, 3, lineSteps[3])
	if n, err := hs.Generate(); n != 3 || err != nil {
		t.Fatalf("Generate after episode 1 = %d, %v; want 3", n, err)
	}
	for i, s := range lineSteps[4:] {
		addGoalStep(t, writer, int64(4+i), s)
	}
	if n, err := hs.Generate(); n != 2 || err != nil {
		t.Fatalf("Generate after episode 2 = %d, %v; want 2", n, err)
	}
	// Three more steps overwrite steps 0 and 1 (capacity 10).
	for pos := int64(9); pos < 12; pos++ {
		addGoalStep(t, writer, pos, goalStep{tensorbuf.Mid, tensorbuf.Mid, float32(13 + pos), 30, -1, 1})
	}
	if got := hs.Stored(); got != 3 {
		t.Fatalf("Stored after overwriting steps 0, 1: %d, want 3", got)
	}
	exp, rel, err := hs.AllExperiences(tensorbuf.ExportSequence)
	if err != nil {
		t.Fatal(err)
	}
	got := readHindsight(t, exp[0], rel)
	if got[0] != realLine(2) || got[1] != relabeledLine(2, 3) {
		t.Fatalf("oldest experiences %+v", got[:2])
	}
}

func TestHindsightAtSample(t *testing.T) {
	for _, be := range nstepBackends {
		for _, tc := range []struct {
			strategy tensorbuf.GoalStrategy
			goals    map[int64][]float64
		}{
			// Episode 3 is running: its end is the newest transition, step 7,
			// so its final goal is step 8's position 21.
			{tensorbuf.GoalFinal, map[int64][]float64{0: {3}, 1: {3}, 2: {3}, 4: {12}, 5: {12}, 7: {21}}},
			{tensorbuf.GoalFuture, map[int64][]float64{0: {1, 2, 3}, 1: {2, 3}, 2: {3}, 4: {11, 12}, 5: {12}, 7: {21}}},
			{tensorbuf.GoalEpisode, map[int64][]float64{0: {1, 2, 3}, 1: {1, 2, 3}, 2: {1, 2, 3}, 4: {11, 12}, 5: {11, 12}, 7: {21}}},
		} {
			t.Run(be.name+"/"+tc.strategy.String(), func(t *testing.T) {
				b, _ := newGoalBuffer(t, be.be(), 16, lineSteps)
				const k = 3 // her_ratio 3/4
				hs, err := tensorbuf.NewHindsight(b, lineConfig(tc.strategy, k, tensorbuf.RelabelAtSample))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := hs.Generate(); !errors.Is(err, tensorbuf.ErrInvalidArg) {
					t.Fatalf("Generate at sample time: %v", err)
				}
				ht := new(tensorbuf.HindsightTransitions)
				relabeled, total := 0, 0
				seen := map[int64]map[float64]bool{}
				for range 50 {
					if err := hs.SampleInto(ht, 40); err != nil {
						t.Fatal(err)
					}
					for _, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
						total++
						if !x.relabeled {
							if x != realLine(x.step) {
								t.Fatalf("real %+v, want %+v", x, realLine(x.step))
							}
							continue
						}
						relabeled++
						if !slices.Contains(tc.goals[x.step], x.goal) {
							t.Fatalf("step %d relabeled with goal %v, not among %v", x.step, x.goal, tc.goals[x.step])
						}
						if want := relabeledLine(x.step, x.goal); x != want {
							t.Fatalf("relabeled %+v, want %+v", x, want)
						}
						if seen[x.step] == nil {
							seen[x.step] = map[float64]bool{}
						}
						seen[x.step][x.goal] = true
					}
				}
				// 2000 draws at ratio 0.75: sd 0.0097, the bound is 5 sd.
				if f := float64(relabeled) / float64(total); math.Abs(f-0.75) > 0.05 {
					t.Fatalf("relabeled fraction %.3f, want 0.75", f)
				}
				for s, choices := range tc.goals {
					for _, g := range choices {
						if !seen[s][g] {
							t.Fatalf("step %d never relabeled with goal %v", s, g)
						}
					}
				}
				exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
				if err != nil || len(rel) != 6 || slices.Contains(rel, true) {
					t.Fatalf("export at sample time: %v relabeled %v", err, rel)
				}
				_ = exp[0].Release()
			})
		}
	}
}

// TestHindsightEpisodeEndSampling checks that uniform sampling draws real
// and stored relabeled experiences in proportion: 6 real and 5*2 relabeled
// with GoalFuture and k = 2.
func TestHindsightEpisodeEndSampling(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 16, lineSteps)
	hs, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalFuture, 2, tensorbuf.RelabelAtEpisodeEnd))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hs.Generate(); n != 10 || err != nil {
		t.Fatalf("Generate = %d, %v", n, err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	relabeled, total := 0, 0
	for range 40 {
		if err := hs.SampleInto(ht, 50); err != nil {
			t.Fatal(err)
		}
		for _, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
			total++
			if x.relabeled {
				relabeled++
				if want := relabeledLine(x.step, x.goal); x != want {
					t.Fatalf("relabeled %+v, want %+v", x, want)
				}
			} else if x != realLine(x.step) {
				t.Fatalf("real %+v", x)
			}
		}
	}
	// 10 of 16 stored experiences are relabeled; 2000 draws, sd 0.011.
	if f := float64(relabeled) / float64(total); math.Abs(f-10.0/16) > 0.055 {
		t.Fatalf("relabeled fraction %.3f, want %.3f", f, 10.0/16)
	}
}

// TestHindsightPrioritized puts real and relabeled transitions into a
// prioritized table and checks probabilities, weights, keys and values.
