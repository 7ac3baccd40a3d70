package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
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
func TestHindsightPrioritized(t *testing.T) {
	ctx := context.Background()
	b, w := newGoalBuffer(t, nil, 16, lineSteps)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Beta: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtEpisodeEnd)
	cfg.Table, cfg.Priority = tbl, 2
	hs, err := tensorbuf.NewHindsight(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hs.Generate(); n != 5 || err != nil {
		t.Fatalf("Generate = %d, %v", n, err)
	}
	if tbl.Size() != 10 {
		t.Fatalf("table holds %d items, want 5 real and 5 relabeled", tbl.Size())
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleTable(ctx, ht, 200); err != nil {
		t.Fatal(err)
	}
	// Every item entered with priority 2: uniform, weights 1.
	keyOf := map[string]uint64{}
	for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		if ht.Probabilities[i] != 0.1 || ht.Weights[i] != 1 {
			t.Fatalf("sample %d: probability %v weight %v", i, ht.Probabilities[i], ht.Weights[i])
		}
		want := realLine(x.step)
		if x.relabeled {
			final := 12.0 // episode 2's final position
			if x.step < 3 {
				final = 3 // episode 1's
			}
			want = relabeledLine(x.step, final)
		}
		if x != want {
			t.Fatalf("sample %d: %+v, want %+v", i, x, want)
		}
		keyOf[fmt.Sprint(x.step, x.relabeled)] = ht.Keys[i]
	}
	if len(keyOf) != 10 {
		t.Fatalf("200 uniform samples of 10 items reached %d of them", len(keyOf))
	}
	// Only relabeled step 2 (priority 3) and real step 0 (priority 1).
	var keys []uint64
	var prios []float64
	for name, k := range keyOf {
		p := 0.0
		switch name {
		case "2 true":
			p = 3
		case "0 false":
			p = 1
		}
		keys, prios = append(keys, k), append(prios, p)
	}
	if err := tbl.UpdatePriorities(keys, prios); err != nil {
		t.Fatal(err)
	}
	if err := hs.SampleTable(ctx, ht, 400); err != nil {
		t.Fatal(err)
	}
	n2 := 0
	for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
		switch {
		case x.step == 2 && x.relabeled:
			n2++
			if x != relabeledLine(2, 3) || ht.Probabilities[i] != 0.75 || ht.Keys[i] != keyOf["2 true"] {
				t.Fatalf("sample %d: %+v p %v", i, x, ht.Probabilities[i])
			}
			// w = (p/pmin)^-beta = (0.75/0.25)^-1.
			if math.Abs(ht.Weights[i]-1.0/3) > 1e-15 {
				t.Fatalf("weight %v, want 1/3", ht.Weights[i])
			}
		case x.step == 0 && !x.relabeled:
			if x != realLine(0) || ht.Probabilities[i] != 0.25 || ht.Weights[i] != 1 {
				t.Fatalf("sample %d: %+v p %v w %v", i, x, ht.Probabilities[i], ht.Weights[i])
			}
		default:
			t.Fatalf("sampled a zero-priority item: %+v", x)
		}
	}
	// 400 draws at 0.75: sd 0.022.
	if f := float64(n2) / 400; math.Abs(f-0.75) > 0.1 {
		t.Fatalf("relabeled step 2 drawn %.3f of the time, want 0.75", f)
	}
	// The ring overwriting step 0 evicts its real and relabeled items.
	for pos := int64(9); pos < 17; pos++ {
		addGoalStep(t, w, pos, goalStep{tensorbuf.Mid, tensorbuf.Mid, float32(pos), 30, -1, 1})
	}
	if tbl.Size() != 8 || hs.Stored() != 4 {
		t.Fatalf("after overwriting step 0: table %d items, %d stored; want 8, 4", tbl.Size(), hs.Stored())
	}
}

func TestHindsightRejectsBadConfig(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 8, lineSteps[:4])
	other, _ := newGoalBuffer(t, nil, 8, nil)
	otherTable, err := other.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	limited, err := b.NewTable(tensorbuf.TableConfig{Name: "limited", RateLimiter: &tensorbuf.RateLimiter{SamplesPerInsert: 1, ErrorBuffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := b.NewTable(tensorbuf.TableConfig{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	good := lineConfig(tensorbuf.GoalFuture, 4, tensorbuf.RelabelAtEpisodeEnd)
	for _, tc := range []struct {
		name   string
		mutate func(c *tensorbuf.HindsightConfig)
		want   error
	}{
		{"unknown achieved field", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Field = "nope" }, tensorbuf.ErrUnknownField},
		{"unknown desired field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = "nope" }, tensorbuf.ErrUnknownField},
		{"built-in field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = tensorbuf.RewardName }, tensorbuf.ErrUnknownField},
		{"action field", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Field = "act" }, tensorbuf.ErrConfig},
		{"index past end", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{3} }, tensorbuf.ErrConfig},
		{"negative index", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Indices = []int{-1} }, tensorbuf.ErrConfig},
		{"no indices", func(c *tensorbuf.HindsightConfig) { c.AchievedGoal.Indices = nil }, tensorbuf.ErrConfig},
		{"repeated index", func(c *tensorbuf.HindsightConfig) {
			c.AchievedGoal.Indices = []int{0, 0}
			c.DesiredGoal.Indices = []int{1, 2}
		}, tensorbuf.ErrConfig},
		{"sizes differ", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{1, 2} }, tensorbuf.ErrConfig},
		{"shared element", func(c *tensorbuf.HindsightConfig) { c.DesiredGoal.Indices = []int{0} }, tensorbuf.ErrConfig},
		{"no reward", func(c *tensorbuf.HindsightConfig) { c.Reward = nil }, tensorbuf.ErrConfig},
		{"no is-done", func(c *tensorbuf.HindsightConfig) { c.IsDone = nil }, tensorbuf.ErrConfig},
		{"k 0", func(c *tensorbuf.HindsightConfig) { c.NumGoals = 0 }, tensorbuf.ErrConfig},
		{"k 1<<40", func(c *tensorbuf.HindsightConfig) { c.NumGoals = 1 << 40 }, tensorbuf.ErrConfig},
		{"k above MaxNumGoals", func(c *tensorbuf.HindsightConfig) { c.NumGoals = tensorbuf.MaxNumGoals + 1 }, tensorbuf.ErrConfig},
		{"k 1<<40 at sample time", func(c *tensorbuf.HindsightConfig) { c.NumGoals, c.Mode = 1<<40, tensorbuf.RelabelAtSample }, tensorbuf.ErrConfig},
		{"strategy", func(c *tensorbuf.HindsightConfig) { c.Strategy = 9 }, tensorbuf.ErrConfig},
		{"mode", func(c *tensorbuf.HindsightConfig) { c.Mode = 5 }, tensorbuf.ErrConfig},
		{"priority", func(c *tensorbuf.HindsightConfig) { c.Priority = math.Inf(1) }, tensorbuf.ErrConfig},
		{"foreign table", func(c *tensorbuf.HindsightConfig) { c.Table = otherTable }, tensorbuf.ErrConfig},
		{"rate-limited table", func(c *tensorbuf.HindsightConfig) { c.Table = limited }, tensorbuf.ErrConfig},
		{"table at sample time", func(c *tensorbuf.HindsightConfig) { c.Table, c.Mode = plain, tensorbuf.RelabelAtSample }, tensorbuf.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			cfg.AchievedGoal.Indices = slices.Clone(good.AchievedGoal.Indices)
			cfg.DesiredGoal.Indices = slices.Clone(good.DesiredGoal.Indices)
			tc.mutate(&cfg)
			if _, err := tensorbuf.NewHindsight(b, cfg); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	hs, err := tensorbuf.NewHindsight(b, good)
	if err != nil {
		t.Fatal(err)
	}
	ht := new(tensorbuf.HindsightTransitions)
	if err := hs.SampleInto(ht, 0); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("sample of 0: %v", err)
	}
	if err := hs.SampleTable(context.Background(), ht, 1); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("SampleTable without a table: %v", err)
	}
	if _, _, err := hs.AllExperiences(7); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("export mode: %v", err)
	}
	if _, err := tensorbuf.NewHindsight(nil, good); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("nil buffer: %v", err)
	}
}

// TestHindsightCutEpisode stores an episode cut short by a reset (a First
// step with no boundary step before it, as a driver run restarted without
// its time step leaves): it is never complete, so Generate relabels only
// the next episode, and sample-time goals never come from the other side
// of the cut.
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
func nstepLine(s int64, relabeled bool, g float64, n int, gamma float64) hsExp {
	cursor := int64(len(lineSteps))
	kEnv := int64(0)
	for kEnv < int64(n) && s+kEnv+1 < cursor {
		kEnv++
		if lineSteps[s+kEnv-1].next == tensorbuf.Last {
			break
		}
	}
	k, sum, pow := kEnv, 0.0, 1.0
	terminated := false
	for j := range kEnv {
		r := float64(lineSteps[s+j].reward)
		if relabeled {
			r = float64(lineReward([]float64{float64(lineSteps[s+j+1].pos)}, []float64{g}))
		}
		sum = float64(sum + float64(pow*r))
		pow = float64(pow * gamma)
		if relabeled && float64(lineSteps[s+j+1].pos) == g {
			k, terminated = j+1, true
			break
		}
	}
	last := lineSteps[s+k-1]
	done := 0.0
	switch {
	case terminated:
		done = 1
	case last.next == tensorbuf.Last && last.discount > 0:
		done = 2
	case last.next == tensorbuf.Last && !relabeled:
		done = 1
	}
	disc := float32(pow)
	if done == 1 {
		disc = 0
	}
	e := hsExp{step: s, relabeled: relabeled, goal: float64(lineSteps[s].goal), nextGoal: float64(lineSteps[s+k].goal),
		reward: float64(float32(sum)), discount: float64(disc), done: done,
		pos: float64(lineSteps[s].pos), nextPos: float64(lineSteps[s+k].pos), marker: float64(100 + s)}
	if relabeled {
		e.goal, e.nextGoal = g, g
	}
	return e
}

func TestHindsightNStepExact(t *testing.T) {
	const n, gamma = 3, 0.5
	rl := func(s int64, g float64) hsExp { return nstepLine(s, true, g, n, gamma) }
	re := func(s int64) hsExp { return nstepLine(s, false, 0, n, gamma) }
	// Hand-computed: reward, discount, IsDone and the step of the next
	// observation.
	for _, tc := range []struct {
		got              hsExp
		reward, discount float64
		done             float64
		nextPos          float64
	}{
		{re(0), -1.75, 0.125, 2, 3},
		{re(1), -1.5, 0.25, 2, 3},
		{re(4), -1, 0, 1, 12},
		{re(7), -1, 0.5, 0, 21},      // truncated at the cursor
		{rl(0, 3), -1.5, 0, 1, 3},    // reaches goal 3 at the third step
		{rl(1, 1), -1.5, 0.25, 2, 3}, // never reaches 1: truncated like the real one
		{rl(4, 11), 0, 0, 1, 11},     // reaches 11 at once: k = 1
		{rl(5, 11), -1, 0.5, 0, 12},  // the real episode terminated; goal 11 did not
	} {
		x := tc.got
		if x.reward != tc.reward || x.discount != tc.discount || x.done != tc.done || x.nextPos != tc.nextPos {
			t.Fatalf("model %+v, want reward %v discount %v done %v next pos %v", x, tc.reward, tc.discount, tc.done, tc.nextPos)
		}
	}
	for _, be := range nstepBackends {
		for _, strategy := range []tensorbuf.GoalStrategy{tensorbuf.GoalFinal, tensorbuf.GoalEpisode} {
			t.Run(be.name+"/"+strategy.String(), func(t *testing.T) {
				b, _ := newGoalBuffer(t, be.be(), 16, lineSteps)
				cfg := lineConfig(strategy, 20, tensorbuf.RelabelAtEpisodeEnd)
				cfg.NStep = tensorbuf.NStepOptions{Horizon: n, DiscountFactor: gamma}
				hs, err := tensorbuf.NewHindsight(b, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := hs.Generate(); err != nil {
					t.Fatal(err)
				}
				exp, rel, err := hs.AllExperiences(tensorbuf.ExportBatch)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[[2]float64]bool{}
				for i, x := range readHindsight(t, exp[0], rel) {
					if want := nstepLine(x.step, x.relabeled, x.goal, n, gamma); x != want {
						t.Fatalf("experience %d: %+v, want %+v", i, x, want)
					}
					if x.relabeled {
						seen[[2]float64{float64(x.step), x.goal}] = true
					}
				}
				if strategy == tensorbuf.GoalEpisode && (!seen[[2]float64{1, 1}] || !seen[[2]float64{5, 11}]) {
					t.Fatalf("20 episode goals per transition missed (1, 1) or (5, 11): %v", seen)
				}
				cfg.Mode = tensorbuf.RelabelAtSample
				at, err := tensorbuf.NewHindsight(b, cfg)
				if err != nil {
					t.Fatal(err)
				}
				ht := new(tensorbuf.HindsightTransitions)
				for range 10 {
					if err := at.SampleInto(ht, 30); err != nil {
						t.Fatal(err)
					}
					for i, x := range readHindsight(t, &ht.Transitions, ht.Relabeled) {
						if want := nstepLine(x.step, x.relabeled, x.goal, n, gamma); x != want {
							t.Fatalf("sample %d: %+v, want %+v", i, x, want)
						}
					}
				}
			})
		}
	}
	b, _ := newGoalBuffer(t, nil, 16, lineSteps)
	for _, opt := range []tensorbuf.NStepOptions{{Horizon: -1}, {Horizon: 2, DiscountFactor: 2}, {Horizon: 2, DiscountFactor: math.NaN()}} {
		cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtSample)
		cfg.NStep = opt
		if _, err := tensorbuf.NewHindsight(b, cfg); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Fatalf("n-step %+v: %v", opt, err)
		}
	}
}
