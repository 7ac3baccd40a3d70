package tensorbuf_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// anyOrderModel keeps, per row, what an AnyOrder writer stores: every
// experience with the step it starts at, the row's cursor, and whether
// its newest step is a provisional next observation (and which).
type anyOrderModel struct {
	steps   map[int]int64
	pending map[int]int // row -> the provisional next observation; absent when none
	exps    map[int][]exp1
	at      map[int][]int64
}

func (m *anyOrderModel) add(row int, e exp1) {
	if p, ok := m.pending[row]; ok && p == e.obs {
		m.at[row] = append(m.at[row], m.steps[row]-1) // continues: one step
		m.steps[row]++
	} else {
		m.at[row] = append(m.at[row], m.steps[row]) // a fragment: two steps
		m.steps[row] += 2
	}
	m.exps[row] = append(m.exps[row], e)
	delete(m.pending, row)
	if e.done == tensorbuf.Running {
		m.pending[row] = e.next
	}
}

// stored returns the experiences of a row whose first step the ring
// still holds.
func (m *anyOrderModel) stored(row int, capacity int64) []exp1 {
	var out []exp1
	for i, e := range m.exps[row] {
		if m.at[row][i] >= m.steps[row]-capacity {
			out = append(out, e)
		}
	}
	return out
}

// TestExperienceAnyOrder: an AnyOrder writer takes experiences in any
// order; AllExperiences gives back exactly the stored ones, SampleTransitions
// only those, n-step returns of fragments stop at their one transition,
// a fragment costs two steps and a continuing experience one, and no cut
// is counted in Stats.
func TestExperienceAnyOrder(t *testing.T) {
	R, T, U := int(tensorbuf.Running), int(tensorbuf.Terminated), int(tensorbuf.Truncated)
	type add struct {
		rows []int
		es   [][3]int // obs, next, done
	}
	for _, tc := range []struct {
		name      string
		envs      int
		capacity  int
		adds      []add
		fragments bool // every experience is a fragment: check n-step returns
	}{
		{"shuffled, one env", 1, 64, []add{
			{[]int{0}, [][3]int{{5, 6, R}}}, {[]int{0}, [][3]int{{1, 2, R}}}, {[]int{0}, [][3]int{{9, 10, U}}},
			{[]int{0}, [][3]int{{3, 4, R}}}, {[]int{0}, [][3]int{{3, 4, T}}}, {[]int{0}, [][3]int{{7, 8, R}}},
			{[]int{0}, [][3]int{{0, 1, R}}},
		}, true},
		{"in order where it matches", 1, 64, []add{
			{[]int{0}, [][3]int{{1, 2, R}}}, {[]int{0}, [][3]int{{2, 3, R}}}, {[]int{0}, [][3]int{{8, 9, R}}},
			{[]int{0}, [][3]int{{9, 10, T}}}, {[]int{0}, [][3]int{{4, 5, R}}}, {[]int{0}, [][3]int{{5, 6, U}}},
			{[]int{0}, [][3]int{{6, 7, R}}}, {[]int{0}, [][3]int{{2, 3, R}}},
		}, false},
		{"three envs, batches mixing both", 3, 64, []add{
			{[]int{0, 1, 2}, [][3]int{{1, 2, R}, {1, 2, R}, {1, 2, T}}},
			{[]int{0, 1, 2}, [][3]int{{2, 3, R}, {7, 8, R}, {4, 5, R}}},
			{[]int{2, 0}, [][3]int{{11, 12, U}, {3, 4, R}}},
			{[]int{1}, [][3]int{{8, 9, T}}},
			{[]int{0, 1, 2}, [][3]int{{20, 21, R}, {30, 31, R}, {40, 41, R}}},
			{[]int{0, 1, 2}, [][3]int{{21, 22, R}, {0, 1, U}, {40, 41, R}}},
		}, false},
		{"the ring wraps", 1, 5, []add{
			{[]int{0}, [][3]int{{1, 2, R}}}, {[]int{0}, [][3]int{{3, 4, R}}}, {[]int{0}, [][3]int{{5, 6, T}}},
			{[]int{0}, [][3]int{{7, 8, R}}}, {[]int{0}, [][3]int{{8, 9, R}}}, {[]int{0}, [][3]int{{0, 5, R}}},
			{[]int{0}, [][3]int{{2, 3, R}}},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newExpBuffer(t, tc.envs, tc.capacity)
			ew, err := b.NewExperienceWriterOptions(tensorbuf.ExperienceOptions{AnyOrder: true})
			if err != nil {
				t.Fatal(err)
			}
			m := &anyOrderModel{steps: map[int]int64{}, pending: map[int]int{}, exps: map[int][]exp1{}, at: map[int][]int64{}}
			k := 0
			for _, a := range tc.adds {
				var es []exp1
				for i, r := range a.rows {
					k++
					e := exp1{obs: a.es[i][0], next: a.es[i][1], done: uint8(a.es[i][2]), act: int64(k), logp: float32(k) / 8, reward: float32(k) - 0.5}
					es = append(es, e)
					m.add(r, e)
				}
				if err := ew.Append(expBatch(a.rows, es)); err != nil {
					t.Fatal(err)
				}
			}
			got := exported(t, b)
			for r := range tc.envs {
				if want := m.stored(r, int64(tc.capacity)); fmt.Sprint(got[r]) != fmt.Sprint(want) {
					t.Errorf("row %d:\nexported %v\nstored   %v", r, got[r], want)
				}
				if b.Cursor(r) != m.steps[r] {
					t.Errorf("row %d: %d steps written, want %d", r, b.Cursor(r), m.steps[r])
				}
			}
			if st := b.Stats(); st.Cuts != 0 || st.DroppedTransitions != 0 {
				t.Errorf("stats %+v: fragments are no contradictions", st)
			}
			tr, err := b.SampleTransitions(64)
			if err != nil {
				t.Fatal(err)
			}
			for r, es := range expsOf(t, tr, 1) {
				for _, e := range es {
					if !slices.Contains(m.stored(r, int64(tc.capacity)), e) {
						t.Errorf("row %d: sampled %v, which is not stored", r, e)
					}
				}
			}
			_ = tr.Release()
			if !tc.fragments {
				return
			}
			ns, err := b.AllNStepExperiences(tensorbuf.ExportBatch, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			defer ns[0].Release()
			if got := expsOf(t, ns[0], 0.5); fmt.Sprint(got[0]) != fmt.Sprint(m.stored(0, int64(tc.capacity))) {
				t.Errorf("3-step returns %v, want the fragments' one-step transitions %v", got[0], m.stored(0, int64(tc.capacity)))
			}
		})
	}
}

// TestExperienceAnyOrderOnlyWhenAsked: without AnyOrder the same
// experience is refused with ErrContinuity and nothing is written.
func TestExperienceAnyOrderOnlyWhenAsked(t *testing.T) {
	for _, anyOrder := range []bool{false, true} {
		b := newExpBuffer(t, 1, 8)
		ew, err := b.NewExperienceWriterOptions(tensorbuf.ExperienceOptions{AnyOrder: anyOrder})
		if err != nil {
			t.Fatal(err)
		}
		if err := ew.Append(expBatch([]int{0}, []exp1{{obs: 1, next: 2}})); err != nil {
			t.Fatal(err)
		}
		err = ew.Append(expBatch([]int{0}, []exp1{{obs: 5, next: 6}}))
		if anyOrder && (err != nil || b.Cursor(0) != 4) || !anyOrder && (!errors.Is(err, tensorbuf.ErrContinuity) || b.Cursor(0) != 2) {
			t.Errorf("AnyOrder %v: %v, cursor %d", anyOrder, err, b.Cursor(0))
		}
	}
}

// expSlices is expBatch's experience as plain slices.
func expSlices(rows []int, es []exp1) tensorbuf.ExperienceSlices {
	e := expBatch(rows, es)
	s := tensorbuf.ExperienceSlices{Rows: rows, Reward: e.Reward, IsDone: e.IsDone,
		Observation: map[string]any{}, NextObservation: map[string]any{}, Action: map[string]any{}, PolicyInfo: map[string]any{}}
	for name, d := range e.Observation {
		s.Observation[name] = d.Data()
	}
	for name, d := range e.NextObservation {
		s.NextObservation[name] = d.Data()
	}
	s.Action["act"] = e.Action["act"].Data()
	s.PolicyInfo["logp"] = e.PolicyInfo["logp"].Data()
	return s
}

// TestNewExperience: experiences built from plain slices append and
// export exactly; slices that do not fit are refused with the sentinel
// errors.
func TestNewExperience(t *testing.T) {
	b := newExpBuffer(t, 2, 16)
	ew, err := b.NewExperienceWriter()
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]exp1{
		{{obs: 0, next: 1, act: 3, logp: 0.25, reward: 1.5}, {obs: 4, next: 5, act: -2, logp: 0.5, reward: -1, done: tensorbuf.Terminated}},
		{{obs: 1, next: 2, act: 7, logp: 1, reward: 2, done: tensorbuf.Truncated}, {obs: 9, next: 10, act: 8, logp: 2, reward: 3}},
	}
	for _, es := range batches {
		e, err := b.NewExperience(expSlices([]int{0, 1}, es))
		if err != nil {
			t.Fatal(err)
		}
		if err := ew.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	got := exported(t, b)
	want := map[int][]exp1{0: {batches[0][0], batches[1][0]}, 1: {batches[0][1], batches[1][1]}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exported %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name   string
		change func(s *tensorbuf.ExperienceSlices)
		want   error
	}{
		{"float64 for float32", func(s *tensorbuf.ExperienceSlices) { s.Observation["obs"] = []float64{1, 2, 3, 4} }, tensorbuf.ErrDType},
		{"a tensor, not a slice", func(s *tensorbuf.ExperienceSlices) { s.Action["act"] = expBatch([]int{0, 1}, batches[0]).Action["act"] }, tensorbuf.ErrDType},
		{"short", func(s *tensorbuf.ExperienceSlices) { s.NextObservation["pix"] = []uint8{1, 2, 3, 4, 5} }, tensorbuf.ErrShape},
		{"long", func(s *tensorbuf.ExperienceSlices) { s.Action["act"] = []int64{1, 2, 3} }, tensorbuf.ErrShape},
		{"unknown field", func(s *tensorbuf.ExperienceSlices) { s.Observation["nope"] = []float32{1} }, tensorbuf.ErrUnknownField},
		{"field of another role", func(s *tensorbuf.ExperienceSlices) { s.Action["logp"] = []float32{1, 2} }, tensorbuf.ErrUnknownField},
		{"missing", func(s *tensorbuf.ExperienceSlices) { delete(s.NextObservation, "obs") }, tensorbuf.ErrMissingField},
		{"no policy info", func(s *tensorbuf.ExperienceSlices) { s.PolicyInfo = nil }, tensorbuf.ErrMissingField},
		{"rows of another length", func(s *tensorbuf.ExperienceSlices) { s.Rows = []int{0} }, tensorbuf.ErrRows},
		{"IsDone of another length", func(s *tensorbuf.ExperienceSlices) { s.IsDone = s.IsDone[:1] }, tensorbuf.ErrRows},
		{"no row", func(s *tensorbuf.ExperienceSlices) { s.Reward, s.IsDone, s.Rows = nil, nil, nil }, tensorbuf.ErrRows},
	} {
		s := expSlices([]int{0, 1}, batches[0])
		tc.change(&s)
		if e, err := b.NewExperience(s); !errors.Is(err, tc.want) || e != nil {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
