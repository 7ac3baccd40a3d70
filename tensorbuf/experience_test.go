package tensorbuf_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// expFields: two observation fields, an action and a policy info field.
var expFields = []tensorbuf.Field{
	{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
	{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{3}},
	{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	{Name: "logp", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Float32, Shape: []int{1}},
}

// exp1 is one experience of one row, as the test keeps it.
type exp1 struct {
	obs, next    int // observation indices: obs(row, i) values
	act          int64
	logp, reward float32
	done         uint8
}

// obsVals returns the "obs" and "pix" values of observation i of a row.
func obsVals(row, i int) ([]float32, []uint8) {
	return []float32{float32(row*1000 + i), float32(-i)}, []uint8{uint8(row), uint8(i), uint8(i * 7)}
}

// expBatch builds the Experience of rows with the given experiences.
func expBatch(rows []int, es []exp1) *tensorbuf.Experience {
	n := len(rows)
	var obs, nobs []float32
	var pix, npix []uint8
	e := &tensorbuf.Experience{Rows: rows}
	act := make([]int64, n)
	logp := make([]float32, n)
	for k, r := range rows {
		o, p := obsVals(r, es[k].obs)
		no, np := obsVals(r, es[k].next)
		obs, pix, nobs, npix = append(obs, o...), append(pix, p...), append(nobs, no...), append(npix, np...)
		act[k], logp[k] = es[k].act, es[k].logp
		e.Reward = append(e.Reward, es[k].reward)
		e.IsDone = append(e.IsDone, es[k].done)
	}
	e.Observation = map[string]*tensor.Dense{
		"obs": tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(obs)),
		"pix": tensor.New(tensor.WithShape(n, 3), tensor.WithBacking(pix)),
	}
	e.NextObservation = map[string]*tensor.Dense{
		"obs": tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(nobs)),
		"pix": tensor.New(tensor.WithShape(n, 3), tensor.WithBacking(npix)),
	}
	e.Action = map[string]*tensor.Dense{"act": tensor.New(tensor.WithShape(n), tensor.WithBacking(act))}
	e.PolicyInfo = map[string]*tensor.Dense{"logp": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(logp))}
	return e
}

// sim plays the rows' episodes: a row's next experience starts from its
// previous next observation unless the previous one ended the episode,
// in which case it starts from a reset observation.
type sim struct {
	cur  map[int]int
	seen map[int][]exp1
	k    int
}

func (s *sim) step(row int, done uint8) exp1 {
	s.k++
	o := s.cur[row]
	e := exp1{obs: o, next: o + 1, act: int64(s.k), logp: float32(s.k) / 4, reward: float32(s.k) * 1.5, done: done}
	s.cur[row] = o + 1
	if done != tensorbuf.Running {
		s.cur[row] = o + 2 // the reset observation differs from the terminal one
	}
	s.seen[row] = append(s.seen[row], e)
	return e
}

func newExpBuffer(t *testing.T, envs, capacity int) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: expFields})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestExperienceRoundTrip: experiences appended in batches (all rows, or
// subsets) come back from AllExperiences exactly, per row in order, with
// IsDone 0, 1 and 2 and the discounts 1, 0 and 1.
func TestExperienceRoundTrip(t *testing.T) {
	type add struct {
		rows []int // nil: all rows
		done []uint8
	}
	R, T, U := tensorbuf.Running, tensorbuf.Terminated, tensorbuf.Truncated
	for _, tc := range []struct {
		name string
		envs int
		adds []add
	}{
		{"one env, both episode ends", 1, []add{
			{nil, []uint8{R}}, {nil, []uint8{R}}, {nil, []uint8{T}}, {nil, []uint8{R}}, {nil, []uint8{U}},
			{nil, []uint8{T}}, {nil, []uint8{R}},
		}},
		{"three envs, staggered ends and subsets", 3, []add{
			{nil, []uint8{R, R, T}},
			{nil, []uint8{R, U, R}},
			{[]int{2, 0}, []uint8{R, T}},
			{[]int{1}, []uint8{R}},
			{nil, []uint8{U, R, T}},
			{nil, []uint8{R, T, R}},
			{[]int{1, 2}, []uint8{R, U}},
			{nil, []uint8{R, R, R}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newExpBuffer(t, tc.envs, 64)
			ew, err := b.NewExperienceWriter()
			if err != nil {
				t.Fatal(err)
			}
			s := &sim{cur: map[int]int{}, seen: map[int][]exp1{}}
			for _, a := range tc.adds {
				rows := a.rows
				if rows == nil {
					rows = []int{0, 1, 2}[:tc.envs]
				}
				var es []exp1
				for k, r := range rows {
					es = append(es, s.step(r, a.done[k]))
				}
				e := expBatch(rows, es)
				e.Rows = a.rows
				if err := ew.Append(e); err != nil {
					t.Fatal(err)
				}
			}
			got := exported(t, b)
			for r := range tc.envs {
				if !slices.Equal(got[r], s.seen[r]) {
					t.Errorf("row %d:\nexported %v\nappended %v", r, got[r], s.seen[r])
				}
			}
			if st := b.Stats(); st.Cuts != 0 {
				t.Errorf("%d cuts: experiences must be stored as continuous trajectories", st.Cuts)
			}
		})
	}
}

// exported reads AllExperiences back per row, oldest first, and checks
// each transition's discount against its IsDone.
func exported(t *testing.T, b *tensorbuf.Buffer) map[int][]exp1 {
	t.Helper()
	all, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer all[0].Release()
	return expsOf(t, all[0], 1)
}

// expsOf reads transitions back per row, in their order, and checks each
// one's discount against its IsDone: gamma, or 0 after a termination.
func expsOf(t *testing.T, tr *tensorbuf.Transitions, gamma float32) map[int][]exp1 {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	obs := h.Observation["obs"].Data().([]float32)
	pix := h.Observation["pix"].Data().([]uint8)
	nobs := h.NextObservation["obs"].Data().([]float32)
	npix := h.NextObservation["pix"].Data().([]uint8)
	act := h.Action["act"].Data().([]int64)
	logp := h.PolicyInfo["logp"].Data().([]float32)
	rew := h.Reward.Data().([]float32)
	disc := h.Discount.Data().([]float32)
	done := h.IsDone.Data().([]uint8)
	index := func(row int, o []float32, p []uint8) int {
		i := int(o[0]) - row*1000
		wo, wp := obsVals(row, i)
		if !slices.Equal(o, wo) || !slices.Equal(p, wp) {
			t.Fatalf("row %d: observation %v %v is none the test appended", row, o, p)
		}
		return i
	}
	out := map[int][]exp1{}
	for i, r := range h.Rows {
		e := exp1{
			obs:  index(r, obs[2*i:2*i+2], pix[3*i:3*i+3]),
			next: index(r, nobs[2*i:2*i+2], npix[3*i:3*i+3]),
			act:  act[i], logp: logp[i], reward: rew[i], done: done[i],
		}
		if want := map[uint8]float32{0: gamma, 1: 0, 2: gamma}[e.done]; disc[i] != want {
			t.Errorf("row %d step %d: IsDone %d with discount %v, want %v", r, h.Steps[i], e.done, disc[i], want)
		}
		out[r] = append(out[r], e)
	}
	return out
}

// TestExperienceRefusals: every refused Append writes nothing, and the
// writer goes on afterwards.
func TestExperienceRefusals(t *testing.T) {
	b := newExpBuffer(t, 2, 16)
	ew, err := b.NewExperienceWriter()
	if err != nil {
		t.Fatal(err)
	}
	first := []exp1{{obs: 0, next: 1}, {obs: 0, next: 1}}
	if err := ew.Append(expBatch([]int{0, 1}, first)); err != nil {
		t.Fatal(err)
	}
	good := func() *tensorbuf.Experience {
		return expBatch([]int{0, 1}, []exp1{{obs: 1, next: 2}, {obs: 1, next: 2, done: tensorbuf.Terminated}})
	}
	for _, tc := range []struct {
		name   string
		change func(e *tensorbuf.Experience)
		want   error
	}{
		{"observation contradicts the pending next observation", func(e *tensorbuf.Experience) {
			e.Observation["obs"].Data().([]float32)[2] = 77 // row 1's obs
		}, tensorbuf.ErrContinuity},
		{"pix contradicts", func(e *tensorbuf.Experience) { e.Observation["pix"].Data().([]uint8)[0] = 99 }, tensorbuf.ErrContinuity},
		{"IsDone 3", func(e *tensorbuf.Experience) { e.IsDone[1] = 3 }, tensorbuf.ErrInvalidArg},
		{"NaN reward", func(e *tensorbuf.Experience) { e.Reward[0] = float32(math.NaN()) }, tensorbuf.ErrInvalidArg},
		{"unknown field", func(e *tensorbuf.Experience) { e.Action["actt"] = e.Action["act"] }, tensorbuf.ErrUnknownField},
		{"field under another role", func(e *tensorbuf.Experience) {
			e.Observation["act"] = e.Action["act"]
			delete(e.Action, "act")
		}, tensorbuf.ErrUnknownField},
		{"missing policy info", func(e *tensorbuf.Experience) { e.PolicyInfo = nil }, tensorbuf.ErrMissingField},
		{"missing next observation", func(e *tensorbuf.Experience) { delete(e.NextObservation, "pix") }, tensorbuf.ErrMissingField},
		{"wrong shape", func(e *tensorbuf.Experience) {
			e.NextObservation["obs"] = tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))
		}, tensorbuf.ErrShape},
		{"wrong dtype", func(e *tensorbuf.Experience) {
			e.Action["act"] = tensor.New(tensor.WithShape(2), tensor.WithBacking(make([]int32, 2)))
		}, tensorbuf.ErrDType},
		{"short IsDone", func(e *tensorbuf.Experience) { e.IsDone = e.IsDone[:1] }, tensorbuf.ErrRows},
		{"row repeated", func(e *tensorbuf.Experience) { e.Rows = []int{1, 1} }, tensorbuf.ErrRows},
		{"row out of range", func(e *tensorbuf.Experience) { e.Rows = []int{0, 2} }, tensorbuf.ErrRows},
	} {
		e := good()
		tc.change(e)
		err := ew.Append(e)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if b.Cursor(0) != 2 || b.Cursor(1) != 2 {
			t.Fatalf("%s: a refused append wrote: cursors %d %d", tc.name, b.Cursor(0), b.Cursor(1))
		}
	}
	if err := ew.Append(nil); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("nil experience: %v", err)
	}
	if err := ew.Append(good()); err != nil {
		t.Fatalf("append after refusals: %v", err)
	}
	// Row 1 terminated: its next experience may start anywhere.
	if err := ew.Append(expBatch([]int{1}, []exp1{{obs: 50, next: 51}})); err != nil {
		t.Fatalf("new episode after Terminated: %v", err)
	}
	got := exported(t, b)
	want := map[int][]exp1{
		0: {{obs: 0, next: 1}, {obs: 1, next: 2}},
		1: {{obs: 0, next: 1}, {obs: 1, next: 2, done: tensorbuf.Terminated}, {obs: 50, next: 51}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exported %v, want %v", got, want)
	}
	// Another writer on the rows, and a buffer of capacity 1, are refused.
	if _, err := b.NewExperienceWriter(0); !errors.Is(err, tensorbuf.ErrRowOwned) {
		t.Errorf("second writer: %v, want ErrRowOwned", err)
	}
	small := newExpBuffer(t, 1, 1)
	if _, err := small.NewExperienceWriter(); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Errorf("capacity 1: %v, want ErrConfig", err)
	}
}

func TestExportModeZeroIsInvalid(t *testing.T) {
	b := newBuffer(t, 1, 8)
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	fillRow(t, w, 3, 0)
	var unset tensorbuf.ExportMode
	if _, err := b.AllExperiences(unset); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("AllExperiences(0) = %v, want ErrInvalidArg", err)
	}
	if _, err := b.AllNStepExperiences(unset, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("AllNStepExperiences(0) = %v, want ErrInvalidArg", err)
	}
	for _, m := range []tensorbuf.ExportMode{tensorbuf.ExportNone, tensorbuf.ExportBatch, tensorbuf.ExportSequence} {
		exp, err := b.AllExperiences(m)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		_ = exp[0].Release()
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct {
		v    interface{ String() string }
		want string
	}{
		{tensorbuf.ExportNone, "none"}, {tensorbuf.ExportBatch, "batch"}, {tensorbuf.ExportSequence, "sequence"},
		{tensorbuf.ExportMode(0), "ExportMode(0)"},
		{tensorbuf.RelabelAtEpisodeEnd, "at-episode-end"}, {tensorbuf.RelabelAtSample, "at-sample"},
		{tensorbuf.RelabelMode(7), "RelabelMode(7)"},
		{tensorbuf.Uniform, "uniform"}, {tensorbuf.GoalFuture, "future"}, {tensorbuf.Mid, "M"},
		{tensorbuf.Action, "action"}, {tensorbuf.Uint8, "uint8"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%T(%v).String() = %q, want %q", tc.v, tc.v, got, tc.want)
		}
	}
}

// TestExportNoneExperiencesStandAlone: each experience of an ExportNone
// export copies only itself to the host, and reusing one for a sample
// leaves the others intact.
func TestExportNoneExperiencesStandAlone(t *testing.T) {
	b := newBuffer(t, 1, 8)
	m := newModel(1, 8)
	fill(t, b, m, [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2), mids(1, 3)})
	exp, err := b.AllExperiences(tensorbuf.ExportNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SampleTransitionsInto(exp[0], 3); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		h, err := exp[i].Host()
		if err != nil {
			t.Fatal(err)
		}
		checkTransition(t, m, h, i, 0, 0, int64(i))
	}
}
