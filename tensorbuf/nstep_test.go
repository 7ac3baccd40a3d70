package tensorbuf_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// plainBackend hides the cpu backend's NStepReward, so buffers on it take
// the gather-and-sum-on-the-host path that backends without an n-step
// kernel use.
type plainBackend struct{ tensorbuf.Backend }

// nstepBackends are the two n-step reward paths.
var nstepBackends = []struct {
	name string
	be   func() tensorbuf.Backend
}{
	{"default", func() tensorbuf.Backend { return nil }},
	{"fallback", func() tensorbuf.Backend { return plainBackend{cpu.New()} }},
}

func newBufferOn(t testing.TB, be tensorbuf.Backend, envs, capacity int) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: testFields, Seed: 1, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// nstepWant is the n-step transition the model expects at step s of row r.
type nstepWant struct {
	k        int64
	reward   float32
	discount float32
	done     float64
}

// modelNStep computes an n-step transition from the model's steps with the
// loop of NStepOptions' doc comment.
func modelNStep(m *model, r int, s int64, n int, gamma float64) nstepWant {
	steps := m.steps[r]
	k := int64(0)
	for k < int64(n) && s+k+1 < m.cursor(r) {
		k++
		if steps[s+k-1].next == tensorbuf.Last {
			break
		}
	}
	sum, g := 0.0, 1.0
	for j := range k {
		sum = float64(sum + float64(g*float64(steps[s+j].reward)))
		g = float64(g * gamma)
	}
	w := nstepWant{k: k, reward: float32(sum), discount: float32(g), done: isDone(steps[s+k-1])}
	if w.done == 1 {
		w.discount = 0
	}
	return w
}

// checkNStep compares n-step transition i of host transitions h (element j
// of its tensors) with the model's.
func checkNStep(t testing.TB, m *model, h *tensorbuf.Transitions, i, j, r int, s int64, n int, gamma float64) {
	t.Helper()
	want := modelNStep(m, r, s, n, gamma)
	what := fmt.Sprintf("transition %d (row %d step %d, n %d, gamma %v)", i, r, s, n, gamma)
	if got := floats(t, h.Reward)[j]; got != float64(want.reward) {
		t.Fatalf("%s: reward %v, want %v", what, got, want.reward)
	}
	if got := floats(t, h.Discount)[j]; got != float64(want.discount) {
		t.Fatalf("%s: discount %v, want %v", what, got, want.discount)
	}
	if got := floats(t, h.IsDone)[j]; got != want.done {
		t.Fatalf("%s: is_done %v, want %v", what, got, want.done)
	}
	for f, fd := range testFields {
		e := fd.Elems()
		if fd.Role == tensorbuf.Observation {
			got := floats(t, h.Observation[fd.Name])
			next := floats(t, h.NextObservation[fd.Name])
			for x := range e {
				if got[j*e+x] != val(f, r, s, x) {
					t.Fatalf("%s: %s[%d] = %v, want %v", what, fd.Name, x, got[j*e+x], val(f, r, s, x))
				}
				if next[j*e+x] != val(f, r, s+want.k, x) {
					t.Fatalf("%s: next %s[%d] = %v, want step %d's %v", what, fd.Name, x, next[j*e+x], s+want.k, val(f, r, s+want.k, x))
				}
			}
		}
	}
}

// TestNStepExactValues checks hand-computed n-step transitions across a
// termination, a truncation, the write cursor and the ring's wrap-around.
func TestNStepExactValues(t *testing.T) {
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	steps := []rawStep{
		{F, M, 1, 1},   // 0: overwritten by step 8
		{M, M, 2, 1},   // 1: overwritten by step 9
		{M, L, 4, 0},   // 2: terminates
		{L, F, 0, 1},   // 3: boundary
		{F, M, 8, 1},   // 4
		{M, L, 16, 1},  // 5: truncated at a time limit
		{L, F, 0, 1},   // 6: boundary
		{F, M, 32, 1},  // 7
		{M, M, 64, 1},  // 8: slot 0
		{M, M, 128, 1}, // 9: slot 1, the newest step
	}
	type tr struct {
		step         int64
		reward, disc float32
		done         float64
		next         int64
	}
	for _, tc := range []struct {
		name  string
		n     int
		gamma float64
		want  []tr
	}{
		{"n1 gamma1 is one-step", 1, 1, []tr{
			{2, 4, 0, 1, 3}, {4, 8, 1, 0, 5}, {5, 16, 1, 2, 6}, {7, 32, 1, 0, 8}, {8, 64, 1, 0, 9}}},
		{"n3 half", 3, 0.5, []tr{
			{2, 4, 0, 1, 3},             // terminates at once
			{4, 8 + 0.5*16, 0.25, 2, 6}, // stops at the truncation, gamma^2
			{5, 16, 0.5, 2, 6},
			{7, 32 + 0.5*64, 0.25, 0, 9}, // truncated at the cursor: k = 2
			{8, 64, 0.5, 0, 9}}},
		{"n8 gamma0", 8, 0, []tr{
			{2, 4, 0, 1, 3}, {4, 8, 0, 2, 6}, {5, 16, 0, 2, 6}, {7, 32, 0, 0, 9}, {8, 64, 0, 0, 9}}},
	} {
		for _, be := range nstepBackends {
			t.Run(tc.name+"/"+be.name, func(t *testing.T) {
				b := newBufferOn(t, be.be(), 1, 8)
				m := newModel(1, 8)
				a := fill(t, b, m, nil)
				for _, s := range steps {
					a.add([]int{0}, []rawStep{s})
				}
				exp, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tensorbuf.NStepOptions{Horizon: tc.n, DiscountFactor: tc.gamma})
				if err != nil {
					t.Fatal(err)
				}
				defer exp[0].Release()
				h, err := exp[0].Host()
				if err != nil {
					t.Fatal(err)
				}
				if len(h.Steps) != len(tc.want) {
					t.Fatalf("steps %v, want %d transitions", h.Steps, len(tc.want))
				}
				rew, disc, done := floats(t, h.Reward), floats(t, h.Discount), floats(t, h.IsDone)
				next := floats(t, h.NextObservation["obs"])
				for i, w := range tc.want {
					if h.Steps[i] != w.step || rew[i] != float64(w.reward) || disc[i] != float64(w.disc) || done[i] != w.done {
						t.Fatalf("transition %d: step %d reward %v discount %v done %v, want %+v", i, h.Steps[i], rew[i], disc[i], done[i], w)
					}
					if next[3*i] != val(0, 0, w.next, 0) {
						t.Fatalf("transition %d: next obs %v is not step %d's %v", i, next[3*i], w.next, val(0, 0, w.next, 0))
					}
					checkNStep(t, m, h, i, i, 0, w.step, tc.n, tc.gamma)
				}
			})
		}
	}
}

// TestNStepOneStepEqualsTransitions checks that horizon 1 with gamma 1
// exports exactly what AllExperiences exports when stored discounts are 0
// or 1.
func TestNStepOneStepEqualsTransitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := newBuffer(t, 3, 6)
	m := newModel(3, 6)
	a := fill(t, b, m, nil)
	ep := &episodes{rng: rng, next: make([]tensorbuf.StepType, 3)}
	for range 20 {
		meta := []rawStep{ep.step(0), ep.step(1), ep.step(2)}
		a.add([]int{0, 1, 2}, meta)
	}
	one, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := one[0].Host()
	hn, err := ns[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h1.Steps, hn.Steps) || !slices.Equal(h1.Rows, hn.Rows) {
		t.Fatal("different transitions")
	}
	for _, pair := range [][2]*tensor.Dense{
		{h1.Reward, hn.Reward}, {h1.Discount, hn.Discount}, {h1.IsDone, hn.IsDone},
		{h1.NextObservation["pix"], hn.NextObservation["pix"]}, {h1.NextObservation["obs"], hn.NextObservation["obs"]},
		{h1.Action["act2"], hn.Action["act2"]}, {h1.PolicyInfo["logp"], hn.PolicyInfo["logp"]},
	} {
		if x, y := floats(t, pair[0]), floats(t, pair[1]); !slices.Equal(x, y) {
			t.Fatalf("one-step %v, n-step %v", x, y)
		}
	}
}

// TestNStepAgainstModel samples and exports n-step transitions of random
// episodes on small rings (wrap-around, partial adds) and checks each one
// against the model, on both reward paths.
func TestNStepAgainstModel(t *testing.T) {
	for _, be := range nstepBackends {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s/seed%d", be.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 9))
				envs, capacity := 1+rng.IntN(3), 2+rng.IntN(7)
				b := newBufferOn(t, be.be(), envs, capacity)
				m := newModel(envs, capacity)
				a := fill(t, b, m, nil)
				ep := &episodes{rng: rng, next: make([]tensorbuf.StepType, envs)}
				gammas := []float64{0, 0.5, 0.9, 0.99, 1}
				tr := new(tensorbuf.Transitions)
				for it := range 40 {
					var rows []int
					var meta []rawStep
					for r := range envs {
						if rng.IntN(4) != 0 {
							rows = append(rows, r)
							meta = append(meta, ep.step(r))
						}
					}
					if len(rows) > 0 {
						a.add(rows, meta)
					}
					opt := tensorbuf.NStepOptions{Horizon: 1 + rng.IntN(5), DiscountFactor: gammas[rng.IntN(len(gammas))]}
					if err := b.SampleNStepInto(tr, 1+rng.IntN(9), opt); err != nil {
						if errors.Is(err, tensorbuf.ErrEmpty) {
							continue
						}
						t.Fatal(err)
					}
					h, err := tr.Host()
					if err != nil {
						t.Fatal(err)
					}
					for i, r := range h.Rows {
						checkNStep(t, m, h, i, i, r, h.Steps[i], opt.Horizon, opt.DiscountFactor)
					}
					if it%10 != 9 {
						continue
					}
					for _, mode := range []tensorbuf.ExportMode{tensorbuf.ExportNone, tensorbuf.ExportSequence} {
						exp, err := b.AllNStepExperiences(mode, opt)
						if err != nil {
							t.Fatal(err)
						}
						for i, e := range exp {
							h, err := e.Host()
							if err != nil {
								t.Fatal(err)
							}
							if mode == tensorbuf.ExportNone {
								checkNStep(t, m, h, i, 0, h.Rows[0], h.Steps[0], opt.Horizon, opt.DiscountFactor)
								continue
							}
							for j, r := range h.Rows {
								checkNStep(t, m, h, j, j, r, h.Steps[j], opt.Horizon, opt.DiscountFactor)
							}
						}
						_ = exp[0].Release()
					}
				}
			})
		}
	}
}

func TestNStepRejectsBadOptions(t *testing.T) {
	b := newBuffer(t, 1, 4)
	m := newModel(1, 4)
	a := fill(t, b, m, nil)
	a.add([]int{0}, mids(1, 0))
	a.add([]int{0}, mids(1, 1))
	tr, err := b.SampleNStep(2, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := tr.Host()
	for _, tc := range []struct {
		name string
		n    int
		opt  tensorbuf.NStepOptions
	}{
		{"horizon 0", 1, tensorbuf.NStepOptions{Horizon: 0, DiscountFactor: 0.5}},
		{"negative horizon", 1, tensorbuf.NStepOptions{Horizon: -3, DiscountFactor: 0.5}},
		{"gamma below 0", 1, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: -0.1}},
		{"gamma above 1", 1, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 1.01}},
		{"gamma NaN", 1, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: math.NaN()}},
		{"no transitions", 0, tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.SampleNStepInto(tr, tc.n, tc.opt); !errors.Is(err, tensorbuf.ErrInvalidArg) {
				t.Fatalf("sample: err = %v, want ErrInvalidArg", err)
			}
			if tc.n > 0 {
				if _, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tc.opt); !errors.Is(err, tensorbuf.ErrInvalidArg) {
					t.Fatalf("export: err = %v, want ErrInvalidArg", err)
				}
			}
			after, err := tr.Host()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(after.Steps, before.Steps) || !slices.Equal(floats(t, after.Reward), floats(t, before.Reward)) {
				t.Fatal("a rejected sample changed the transitions")
			}
		})
	}
	if _, err := b.AllNStepExperiences(9, tensorbuf.NStepOptions{Horizon: 1}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("export mode: %v", err)
	}
	empty := newBuffer(t, 2, 4)
	if _, err := empty.SampleNStep(1, tensorbuf.NStepOptions{Horizon: 1}); !errors.Is(err, tensorbuf.ErrEmpty) {
		t.Fatalf("empty sample: %v", err)
	}
	if _, err := empty.AllNStepExperiences(tensorbuf.ExportNone, tensorbuf.NStepOptions{Horizon: 1}); !errors.Is(err, tensorbuf.ErrEmpty) {
		t.Fatalf("empty export: %v", err)
	}
}
