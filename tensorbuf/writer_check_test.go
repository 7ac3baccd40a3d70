package tensorbuf_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// export is what AllExperiences holds: per transition its row, step,
// reward, discount and first obs element.
type export struct {
	rows     []int
	steps    []int64
	reward   []float64
	discount []float64
	obs0     []float64
}

func exportAll(t *testing.T, b *tensorbuf.Buffer) export {
	t.Helper()
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	h, err := exp[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	obs := floats(t, h.Observation["obs"])
	e := export{rows: h.Rows, steps: h.Steps, reward: floats(t, h.Reward), discount: floats(t, h.Discount)}
	for i := range h.Rows {
		e.obs0 = append(e.obs0, obs[3*i])
	}
	for _, tr := range append(exp, h) {
		if err := tr.Release(); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestAddRefusesNonFinite: NaN or infinite rewards and discounts are
// refused with ErrInvalidArg and nothing is written: with capacity 2 the
// refused step would have overwritten step 0, so a write would show in the
// export.
func TestAddRefusesNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name             string
		reward, discount [2]float32
	}{
		{"NaN reward", [2]float32{99, nan}, [2]float32{1, 1}},
		{"+Inf reward", [2]float32{inf, 99}, [2]float32{1, 1}},
		{"-Inf reward", [2]float32{99, -inf}, [2]float32{1, 1}},
		{"NaN discount", [2]float32{99, 99}, [2]float32{nan, 1}},
		{"+Inf discount", [2]float32{99, 99}, [2]float32{1, inf}},
		{"-Inf discount", [2]float32{99, 99}, [2]float32{-inf, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuffer(t, 2, 2)
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			rows := []int{0, 1}
			for pos, meta := range [][]rawStep{
				{{tensorbuf.First, tensorbuf.Mid, 1, 1}, {tensorbuf.First, tensorbuf.Mid, 11, 0.5}},
				{{tensorbuf.Mid, tensorbuf.Last, 2, 0}, {tensorbuf.Mid, tensorbuf.Last, 12, 0}},
			} {
				p := int64(pos)
				if err := w.Add(makeStep(t, rows, []int64{p, p}, meta)); err != nil {
					t.Fatal(err)
				}
			}
			want := export{rows: []int{0, 1}, steps: []int64{0, 0}, reward: []float64{1, 11}, discount: []float64{1, 0.5},
				obs0: []float64{val(0, 0, 0, 0), val(0, 1, 0, 0)}}
			bad := makeStep(t, rows, []int64{2, 2}, []rawStep{
				{tensorbuf.Last, tensorbuf.First, tc.reward[0], tc.discount[0]},
				{tensorbuf.Last, tensorbuf.First, tc.reward[1], tc.discount[1]},
			})
			if err := w.Add(bad); !errors.Is(err, tensorbuf.ErrInvalidArg) {
				t.Fatalf("Add: %v, want ErrInvalidArg", err)
			}
			if c0, c1 := b.Cursor(0), b.Cursor(1); c0 != 2 || c1 != 2 {
				t.Fatalf("cursors %d, %d after a refused add, want 2, 2", c0, c1)
			}
			if got := b.Stats(); got != (tensorbuf.Stats{Steps: 4}) {
				t.Fatalf("Stats = %+v, want 4 steps", got)
			}
			if got := exportAll(t, b); !equalExport(got, want) {
				t.Fatalf("export after a refused add:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func equalExport(a, b export) bool {
	return slices.Equal(a.rows, b.rows) && slices.Equal(a.steps, b.steps) && slices.Equal(a.reward, b.reward) &&
		slices.Equal(a.discount, b.discount) && slices.Equal(a.obs0, b.obs0)
}

// contradicting is a hand-appended row whose next_step_types contradict
// the following step types at steps 0, 2, 4 and 6: of the episode's six
// transitions (t = 0..5) only 1, 3 and 5 survive; the cut at the boundary
// step 6 drops none (a boundary step starts no transition).
var contradicting = []rawStep{
	{tensorbuf.First, tensorbuf.First, 1, 1}, // should be next Mid
	{tensorbuf.Mid, tensorbuf.Mid, 2, 1},
	{tensorbuf.Mid, tensorbuf.First, 3, 1}, // should be next Mid
	{tensorbuf.Mid, tensorbuf.Mid, 4, 1},
	{tensorbuf.Mid, tensorbuf.Last, 5, 1}, // step 5 is Mid
	{tensorbuf.Mid, tensorbuf.Last, 6, 0},
	{tensorbuf.Last, tensorbuf.First, 0, 1},
	{tensorbuf.Mid, tensorbuf.Mid, 7, 1}, // after a boundary: should be First
}

// TestCutStats: cut steps and the transitions they drop are counted.
func TestCutStats(t *testing.T) {
	b := newBuffer(t, 1, 16)
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for pos, s := range contradicting {
		if err := w.Add(makeStep(t, []int{0}, []int64{int64(pos)}, []rawStep{s})); err != nil {
			t.Fatalf("step %d: %v", pos, err)
		}
	}
	if got, want := b.Stats(), (tensorbuf.Stats{Steps: 8, Cuts: 4, DroppedTransitions: 3}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	got := exportAll(t, b)
	want := export{rows: []int{0, 0, 0}, steps: []int64{1, 3, 5}, reward: []float64{2, 4, 6}, discount: []float64{1, 1, 0},
		obs0: []float64{val(0, 0, 1, 0), val(0, 0, 3, 0), val(0, 0, 5, 0)}}
	if !equalExport(got, want) {
		t.Fatalf("export:\n got %+v\nwant %+v", got, want)
	}
}

// TestStrictWriter: a strict writer refuses each contradicting step of the
// same hand-appended row with ErrStepType and writes nothing; the
// corrected step is then accepted, and no cut is ever made.
func TestStrictWriter(t *testing.T) {
	b := newBuffer(t, 2, 16)
	w, err := b.NewWriterOptions(tensorbuf.WriterOptions{Strict: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, s := range contradicting {
		pos := b.Cursor(0)
		err := w.Add(makeStep(t, []int{0}, []int64{pos}, []rawStep{s}))
		if errors.Is(err, tensorbuf.ErrStepType) {
			refused++
			if b.Cursor(0) != pos {
				t.Fatalf("refused step moved the cursor to %d", b.Cursor(0))
			}
			// The previous step's next step type is what the row needs.
			_, s.st, _ = b.StepTypeAt(0, pos-1)
			err = w.Add(makeStep(t, []int{0}, []int64{pos}, []rawStep{s}))
		}
		if err != nil {
			t.Fatalf("step %d: %v", pos, err)
		}
	}
	if refused != 4 {
		t.Fatalf("%d steps refused, want 4", refused)
	}
	if got, want := b.Stats(), (tensorbuf.Stats{Steps: 8}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	// One contradicting row refuses the whole step: row 0 continues its
	// episode, row 1 (written by a non-strict writer first) does not.
	w1, err := b.NewWriter(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w1.Add(makeStep(t, []int{1}, []int64{0}, []rawStep{{tensorbuf.First, tensorbuf.Mid, 1, 1}})); err != nil {
		t.Fatal(err)
	}
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = b.NewWriterOptions(tensorbuf.WriterOptions{Strict: true}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, next0, _ := b.StepTypeAt(0, 7)
	step := makeStep(t, []int{0, 1}, []int64{8, 1}, []rawStep{{next0, tensorbuf.Mid, 1, 1}, {tensorbuf.First, tensorbuf.Mid, 1, 1}})
	if err := w.Add(step); !errors.Is(err, tensorbuf.ErrStepType) {
		t.Fatalf("Add with row 1 contradicting: %v, want ErrStepType", err)
	}
	if c0, c1 := b.Cursor(0), b.Cursor(1); c0 != 8 || c1 != 1 {
		t.Fatalf("cursors %d, %d after a refused step, want 8, 1", c0, c1)
	}
	if got, want := b.Stats(), (tensorbuf.Stats{Steps: 9}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// TestStatsConcurrent reads Stats while writers add (for -race).
func TestStatsConcurrent(t *testing.T) {
	b := newBuffer(t, 2, 4)
	var wg sync.WaitGroup
	for r := range 2 {
		w, err := b.NewWriter(r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for pos := range int64(50) {
				// Every step First after a Mid next: a cut each time.
				if err := w.Add(makeStep(t, []int{r}, []int64{pos}, []rawStep{{tensorbuf.First, tensorbuf.Mid, 1, 1}})); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 100 {
		_ = b.Stats()
	}
	wg.Wait()
	if got, want := b.Stats(), (tensorbuf.Stats{Steps: 100, Cuts: 98, DroppedTransitions: 98}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestShapeErrorIsReadable(t *testing.T) {
	b := newBuffer(t, 4, 8)
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	meta := make([]rawStep, 4)
	for _, tc := range []struct {
		field string
		shape []int
		want  string
	}{
		{"obs", []int{3}, `field "obs": want shape [4 3] (4 rows x [3]), got [3]`},
		{"obs", []int{4, 2}, `field "obs": want shape [4 3] (4 rows x [3]), got [4 2]`},
		{"pix", []int{2, 2, 2}, `field "pix": want shape [4 2 2] (4 rows x [2 2]), got [2 2 2]`},
		{"act", []int{4, 1}, `field "act": want shape [4] (4 rows of scalars), got [4 1]`},
	} {
		s := makeStep(t, []int{0, 1, 2, 3}, []int64{0, 0, 0, 0}, meta)
		fd := testFields[slices.IndexFunc(testFields, func(f tensorbuf.Field) bool { return f.Name == tc.field })]
		n := 1
		for _, d := range tc.shape {
			n *= d
		}
		s.Values[tc.field] = denseOf(fd.DType, tc.shape, make([]float64, n))
		err := w.Add(s)
		if !errors.Is(err, tensorbuf.ErrShape) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("shape %v: %v, want ErrShape ending %q", tc.shape, err, tc.want)
		}
	}
	if b.Cursor(0) != 0 {
		t.Fatal("a refused add wrote a step")
	}
}
