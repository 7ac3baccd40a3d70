package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

func TestNewRejectsBadConfig(t *testing.T) {
	f32 := tensorbuf.Field{Name: "x", DType: tensorbuf.Float32}
	for _, tc := range []struct {
		name string
		cfg  tensorbuf.Config
	}{
		{"no envs", tensorbuf.Config{NumEnvs: 0, Capacity: 4}},
		{"no capacity", tensorbuf.Config{NumEnvs: 1, Capacity: 0}},
		{"unnamed field", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{DType: tensorbuf.Float32}}}},
		{"bad dtype", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{Name: "x", DType: 99}}}},
		{"bad role", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{Name: "x", Role: 7}}}},
		{"zero dim", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{Name: "x", Shape: []int{2, 0}}}}},
		{"duplicate", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{f32, f32}}},
		{"builtin name", tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: []tensorbuf.Field{{Name: "reward"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tensorbuf.New(tc.cfg); !errors.Is(err, tensorbuf.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

// meta returns n steps of Mid -> Mid with reward r0, r0+1, ...
func mids(n int, r0 float32) []rawStep {
	out := make([]rawStep, n)
	for i := range out {
		out[i] = rawStep{st: tensorbuf.Mid, next: tensorbuf.Mid, reward: r0 + float32(i), discount: 1}
	}
	return out
}

// TestAddRejectsBadInputAndChangesNothing refuses each bad step with its
// error and writes nothing, for adds of two rows and of one row (the
// single-row path, which hands what it does not take to the general
// one), with fields by name (Values) and by position (Fields).
func TestAddRejectsBadInputAndChangesNothing(t *testing.T) {
	type form struct {
		rows   []int
		byPos  bool
		single bool
	}
	forms := map[string]form{
		"two rows":              {rows: []int{0, 1}},
		"two rows, by position": {rows: []int{0, 1}, byPos: true},
		"one row":               {rows: []int{1}, single: true},
		"one row, by position":  {rows: []int{1}, byPos: true, single: true},
	}
	fieldIndex := func(name string) int {
		return slices.IndexFunc(testFields, func(f tensorbuf.Field) bool { return f.Name == name })
	}
	// set replaces (or, with d nil, removes) a field in either form.
	set := func(s *tensorbuf.Step, name string, d *tensor.Dense) {
		switch {
		case s.Fields != nil:
			s.Fields[fieldIndex(name)] = d
		case d == nil:
			delete(s.Values, name)
		default:
			s.Values[name] = d
		}
	}
	f32 := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	}
	for _, tc := range []struct {
		name     string
		mutate   func(s *tensorbuf.Step, n int)
		want     error
		twoRows  bool // only for adds of two rows
		byName   bool // only for fields by name
		position bool // only for fields by position
	}{
		{name: "unknown field", byName: true, mutate: func(s *tensorbuf.Step, n int) { s.Values["nope"] = s.Values["obs"] }, want: tensorbuf.ErrUnknownField},
		{name: "a field too many", position: true, mutate: func(s *tensorbuf.Step, n int) { s.Fields = append(s.Fields, s.Fields[0]) }, want: tensorbuf.ErrUnknownField},
		{name: "missing field", mutate: func(s *tensorbuf.Step, n int) { set(s, "pix", nil) }, want: tensorbuf.ErrMissingField},
		{name: "fields cut short", position: true, mutate: func(s *tensorbuf.Step, n int) { s.Fields = s.Fields[:2] }, want: tensorbuf.ErrMissingField},
		{name: "Values and Fields", position: true, mutate: func(s *tensorbuf.Step, n int) {
			s.Values = map[string]*tensor.Dense{"obs": s.Fields[0]}
		}, want: tensorbuf.ErrInvalidArg},
		{name: "dtype", mutate: func(s *tensorbuf.Step, n int) {
			set(s, "obs", tensor.New(tensor.WithShape(n, 3), tensor.Of(tensor.Float64)))
		}, want: tensorbuf.ErrDType},
		{name: "shape", mutate: func(s *tensorbuf.Step, n int) { set(s, "obs", f32(n, 4)) }, want: tensorbuf.ErrShape},
		{name: "rank", mutate: func(s *tensorbuf.Step, n int) {
			set(s, "pix", tensor.New(tensor.WithShape(n, 4), tensor.Of(tensor.Uint8)))
		}, want: tensorbuf.ErrShape},
		{name: "field row count", mutate: func(s *tensorbuf.Step, n int) { set(s, "obs", f32(n+1, 3)) }, want: tensorbuf.ErrShape},
		{name: "masked field", mutate: func(s *tensorbuf.Step, n int) {
			d := f32(n, 3)
			d.ResetMask(false)
			set(s, "obs", d)
		}, want: tensorbuf.ErrShape},
		{name: "transposed field", mutate: func(s *tensorbuf.Step, n int) {
			d := f32(3, n)
			if err := d.T(); err != nil {
				t.Fatal(err)
			}
			set(s, "obs", d)
		}, want: tensorbuf.ErrShape},
		{name: "reward count", mutate: func(s *tensorbuf.Step, n int) { s.Reward = s.Reward[:n-1] }, want: tensorbuf.ErrRows},
		{name: "foreign row", mutate: func(s *tensorbuf.Step, n int) { s.Rows[n-1] = 2 }, want: tensorbuf.ErrRows},
		{name: "row out of range", mutate: func(s *tensorbuf.Step, n int) { s.Rows[n-1] = 9 }, want: tensorbuf.ErrRows},
		{name: "row twice", twoRows: true, mutate: func(s *tensorbuf.Step, n int) { s.Rows = []int{1, 1} }, want: tensorbuf.ErrRows},
		{name: "step type", mutate: func(s *tensorbuf.Step, n int) { s.StepType[n-1] = 5 }, want: tensorbuf.ErrInvalidArg},
		{name: "next step type", mutate: func(s *tensorbuf.Step, n int) { s.NextStepType[0] = -1 }, want: tensorbuf.ErrInvalidArg},
		{name: "NaN reward", mutate: func(s *tensorbuf.Step, n int) { s.Reward[0] = float32(math.NaN()) }, want: tensorbuf.ErrInvalidArg},
	} {
		for fname, fm := range forms {
			if tc.twoRows && fm.single || tc.byName && fm.byPos || tc.position && !fm.byPos {
				continue
			}
			t.Run(tc.name+"/"+fname, func(t *testing.T) {
				good := func() *tensorbuf.Step {
					pos := make([]int64, len(fm.rows))
					s := makeStep(t, slices.Clone(fm.rows), pos, mids(len(fm.rows), 0))
					if fm.byPos {
						s.Fields = make([]*tensor.Dense, len(testFields))
						for i, f := range testFields {
							s.Fields[i] = s.Values[f.Name]
						}
						s.Values = nil
					}
					return s
				}
				b := newBuffer(t, 3, 4)
				w, err := b.NewWriter(0, 1)
				if err != nil {
					t.Fatal(err)
				}
				s := good()
				tc.mutate(s, len(fm.rows))
				if err := w.Add(s); !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				if b.Size() != 0 || b.Cursor(0) != 0 || b.Cursor(1) != 0 || b.Stats() != (tensorbuf.Stats{}) {
					t.Fatalf("rejected add wrote: size %d, stats %+v", b.Size(), b.Stats())
				}
				if err := w.Add(good()); err != nil {
					t.Fatalf("good add after a rejected one: %v", err)
				}
				for r := range 3 {
					want := int64(0)
					if slices.Contains(fm.rows, r) {
						want = 1
					}
					if got := b.Cursor(r); got != want {
						t.Fatalf("cursor of row %d is %d, want %d", r, got, want)
					}
				}
			})
		}
	}
}

func TestWritersOwnDisjointRows(t *testing.T) {
	b := newBuffer(t, 4, 4)
	w1, err := b.NewWriter(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.NewWriter(1, 2); !errors.Is(err, tensorbuf.ErrRowOwned) {
		t.Fatalf("second writer on row 2: %v", err)
	}
	if _, err := b.NewWriter(3, 3); !errors.Is(err, tensorbuf.ErrRows) {
		t.Fatalf("row given twice: %v", err)
	}
	if _, err := b.NewWriter(4); !errors.Is(err, tensorbuf.ErrRows) {
		t.Fatalf("row out of range: %v", err)
	}
	w2, err := b.NewWriter(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Add(makeStep(t, []int{0}, []int64{0}, mids(1, 0))); !errors.Is(err, tensorbuf.ErrRows) {
		t.Fatalf("writing another writer's row: %v", err)
	}
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.NewWriter(2); err != nil {
		t.Fatalf("row of a closed writer: %v", err)
	}
	if err := w1.Add(makeStep(t, []int{0}, []int64{0}, mids(1, 0))); !errors.Is(err, tensorbuf.ErrClosed) {
		t.Fatalf("add on closed writer: %v", err)
	}
}

// fill adds n steps to every row of a fresh writer over all rows.
func fill(t *testing.T, b *tensorbuf.Buffer, m *model, metas [][]rawStep) *adder {
	t.Helper()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	a := &adder{t: t, m: m, w: w}
	rows := make([]int, b.NumEnvs())
	for i := range rows {
		rows[i] = i
	}
	for _, meta := range metas {
		a.add(rows, meta)
	}
	return a
}

func TestRingOverwritesOldest(t *testing.T) {
	b := newBuffer(t, 1, 3)
	m := newModel(1, 3)
	var metas [][]rawStep
	for i := range 5 {
		metas = append(metas, mids(1, float32(10*i)))
	}
	fill(t, b, m, metas)
	if b.Cursor(0) != 5 || b.Oldest(0) != 2 || b.Size() != 3 {
		t.Fatalf("cursor %d oldest %d size %d, want 5 2 3", b.Cursor(0), b.Oldest(0), b.Size())
	}
	bt, err := b.SampleSequences(8, 3, tensorbuf.SequenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if it := hb.Items[i]; it.Start != 2 || it.Len != 3 {
			t.Fatalf("window %+v, the only one is [2, 5)", it)
		}
		checkWindow(t, m, hb, i, 0, 2, 3)
	}
	if got := floats(t, hb.Reward)[:3]; !slices.Equal(got, []float64{20, 30, 40}) {
		t.Fatalf("rewards %v, want [20 30 40]", got)
	}
	if _, err := b.SampleSequences(1, 4, tensorbuf.SequenceOptions{}); !errors.Is(err, tensorbuf.ErrSequenceLen) {
		t.Fatalf("sequence longer than capacity: %v", err)
	}
}

// TestSampleWrappedRows samples windows from wrapped rings of as many
// rows as the sampler keeps a table of oldest ring slots for (64), one
// more, and more still (where it finds them per draw), and
// checks every item's window and its data against the model.
func TestSampleWrappedRows(t *testing.T) {
	for _, envs := range []int{1, 64, 65, 70} {
		b := newBuffer(t, envs, 5)
		m := newModel(envs, 5)
		var metas [][]rawStep
		for i := range 8 {
			metas = append(metas, mids(envs, float32(100*i)))
		}
		fill(t, b, m, metas)
		bt, err := b.SampleSequences(256, 2, tensorbuf.SequenceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hb, err := bt.Host()
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range hb.Items {
			if it.Start < 3 || it.Start > 6 || it.Len != 2 {
				t.Fatalf("%d rows: item %d %+v, want a window of 2 in [3, 8)", envs, i, it)
			}
			checkWindow(t, m, hb, i, it.Row, it.Start, 2)
		}
		bt.Release()
	}
}

// episode returns the steps of an episode of n steps (F, M..., last with
// the given discount) followed by its boundary step.
func episode(n int, discount float32, r0 float32) []rawStep {
	out := make([]rawStep, 0, n+1)
	for i := range n {
		s := rawStep{st: tensorbuf.Mid, next: tensorbuf.Mid, reward: r0 + float32(i), discount: 1}
		if i == 0 {
			s.st = tensorbuf.First
		}
		if i == n-1 {
			s.next, s.discount = tensorbuf.Last, discount
		}
		out = append(out, s)
	}
	return append(out, rawStep{st: tensorbuf.Last, next: tensorbuf.First, reward: 0, discount: 1})
}

func TestEpisodeAwareWindows(t *testing.T) {
	// One row: episode F M M L(terminal) boundary, then F M ... open.
	steps := append(episode(3, 0, 1), rawStep{st: tensorbuf.First, next: tensorbuf.Mid, reward: 9, discount: 1},
		rawStep{st: tensorbuf.Mid, next: tensorbuf.Mid, reward: 10, discount: 1},
		rawStep{st: tensorbuf.Mid, next: tensorbuf.Mid, reward: 11, discount: 1})
	b := newBuffer(t, 1, 16)
	m := newModel(1, 16)
	var metas [][]rawStep
	for _, s := range steps {
		metas = append(metas, []rawStep{s})
	}
	fill(t, b, m, metas)
	// Valid starts for L=3: 0..4 without the boundary 3: 0, 1, 2, 4.
	wantLen := map[int64]int{0: 3, 1: 3, 2: 2, 4: 3}
	seen := map[int64]bool{}
	bt := new(tensorbuf.Batch)
	for range 50 {
		if err := b.SampleSequencesInto(bt, 4, 3, tensorbuf.SequenceOptions{EpisodeAware: true}); err != nil {
			t.Fatal(err)
		}
		hb, err := bt.Host()
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range hb.Items {
			wl, ok := wantLen[it.Start]
			if !ok || it.Len != wl || it.Pad != 3-wl {
				t.Fatalf("window %+v; valid starts and lengths %v", it, wantLen)
			}
			seen[it.Start] = true
			checkWindow(t, m, hb, i, 0, it.Start, it.Len)
		}
	}
	if len(seen) != len(wantLen) {
		t.Fatalf("starts seen %v, want all of %v", seen, wantLen)
	}
}

func TestTransitionsAndIsDone(t *testing.T) {
	// Row 0: terminated episode of 2; row 1: truncated episode of 2.
	b := newBuffer(t, 2, 8)
	m := newModel(2, 8)
	e0, e1 := episode(2, 0, 1), episode(2, 1, 5)
	fill(t, b, m, [][]rawStep{{e0[0], e1[0]}, {e0[1], e1[1]}, {e0[2], e1[2]}})
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	h, err := exp[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	// Transitions at t=0 (rows 0, 1) and t=1 (rows 0, 1); t=2 is the boundary.
	if !slices.Equal(h.Rows, []int{0, 1, 0, 1}) || !slices.Equal(h.Steps, []int64{0, 0, 1, 1}) {
		t.Fatalf("order rows %v steps %v", h.Rows, h.Steps)
	}
	if got := floats(t, h.IsDone); !slices.Equal(got, []float64{0, 0, 1, 2}) {
		t.Fatalf("is_done %v, want [0 0 1 2]", got)
	}
	if got := floats(t, h.Reward); !slices.Equal(got, []float64{1, 5, 2, 6}) {
		t.Fatalf("reward %v, want [1 5 2 6]", got)
	}
	if got := floats(t, h.Discount); !slices.Equal(got, []float64{1, 1, 0, 1}) {
		t.Fatalf("discount %v, want [1 1 0 1]", got)
	}
	if got := h.NextObservation["obs"].Shape(); !slices.Equal(got, []int{4, 1, 3}) {
		t.Fatalf("next obs shape %v", got)
	}
	for i := range 4 {
		checkTransition(t, m, h, i, i, h.Rows[i], h.Steps[i])
	}
}

func TestEmptyAndInvalidSamples(t *testing.T) {
	b := newBuffer(t, 2, 4)
	ctx := context.Background()
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"table empty", func() error { _, err := tbl.Sample(ctx, 1); return err }(), tensorbuf.ErrEmpty},
		{"table n=0", func() error { _, err := tbl.Sample(ctx, 0); return err }(), tensorbuf.ErrInvalidArg},
		{"sequences empty", func() error { _, err := b.SampleSequences(1, 1, tensorbuf.SequenceOptions{}); return err }(), tensorbuf.ErrEmpty},
		{"sequences n<0", func() error { _, err := b.SampleSequences(-1, 1, tensorbuf.SequenceOptions{}); return err }(), tensorbuf.ErrInvalidArg},
		{"sequences too long", func() error { _, err := b.SampleSequences(1, 5, tensorbuf.SequenceOptions{}); return err }(), tensorbuf.ErrSequenceLen},
		{"transitions empty", func() error { _, err := b.SampleTransitions(1); return err }(), tensorbuf.ErrEmpty},
		{"transitions n=0", func() error { _, err := b.SampleTransitions(0); return err }(), tensorbuf.ErrInvalidArg},
		{"export empty", func() error { _, err := b.AllExperiences(tensorbuf.ExportBatch); return err }(), tensorbuf.ErrEmpty},
		{"export mode", func() error { _, err := b.AllExperiences(7); return err }(), tensorbuf.ErrInvalidArg},
		{"unknown table", func() error { _, err := b.Table("nope"); return err }(), tensorbuf.ErrUnknownTable},
		{"duplicate table", func() error { _, err := b.NewTable(tensorbuf.TableConfig{Name: "t"}); return err }(), tensorbuf.ErrTableExists},
		{"item beyond cursor", func() error { _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 1}); return err }(), tensorbuf.ErrItem},
		{"item too long", func() error { _, err := tbl.Insert(tensorbuf.Item{Row: 0, Len: 3, Pad: 2}); return err }(), tensorbuf.ErrSequenceLen},
		{"item row", func() error { _, err := tbl.Insert(tensorbuf.Item{Row: 2, Len: 1}); return err }(), tensorbuf.ErrRows},
		{"item priority", func() error { _, err := tbl.Insert(tensorbuf.Item{Len: 1, Priority: -2}); return err }(), tensorbuf.ErrInvalidArg},
		{"unknown key", tbl.UpdatePriorities([]uint64{7}, []float64{1}), tensorbuf.ErrUnknownKey},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestUseAfterClose(t *testing.T) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: testFields})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := b.NewWriter()
	tbl, _ := b.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err := w.Add(makeStep(t, []int{0}, []int64{0}, mids(1, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Insert(tensorbuf.Item{Len: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"add":         w.Add(makeStep(t, []int{0}, []int64{1}, mids(1, 0))),
		"sample":      func() error { _, err := tbl.Sample(context.Background(), 1); return err }(),
		"insert":      func() error { _, err := tbl.Insert(tensorbuf.Item{Len: 1}); return err }(),
		"all":         func() error { _, err := tbl.All(); return err }(),
		"sequences":   func() error { _, err := b.SampleSequences(1, 1, tensorbuf.SequenceOptions{}); return err }(),
		"transitions": func() error { _, err := b.SampleTransitions(1); return err }(),
		"export":      func() error { _, err := b.AllExperiences(tensorbuf.ExportNone); return err }(),
		"writer":      func() error { _, err := b.NewWriter(); return err }(),
		"table":       func() error { _, err := b.NewTable(tensorbuf.TableConfig{Name: "u"}); return err }(),
		"close":       b.Close(),
	} {
		if !errors.Is(err, tensorbuf.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestRingMemoryIsTheStepBytes checks that a buffer of 3 KB steps holds
// within 5% of the raw bytes of the steps it stores.
func TestRingMemoryIsTheStepBytes(t *testing.T) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 4, Capacity: 1000, Fields: []tensorbuf.Field{
		{Name: "pixels", DType: tensorbuf.Uint8, Shape: []int{32, 32, 3}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Float32, Shape: []int{5}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// 3,072 + 20 bytes of fields + 16 of step types, reward and discount.
	if b.StepBytes() != 3108 {
		t.Fatalf("step bytes %d, want 3108", b.StepBytes())
	}
	raw := int64(4*1000) * b.StepBytes()
	if got := b.MemoryBytes(); got < raw || float64(got) > 1.05*float64(raw) {
		t.Fatalf("memory %d bytes for %d bytes of steps", got, raw)
	}
}

// TestExportOrderWithRowsFarApart exports rows whose stored steps do not
// overlap in time (one row written far more often than the other), which
// takes the sorting path of the export, and rows that overlap, which
// take the scanning path.
func TestExportOrderWithRowsFarApart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		adds0, adds1 int
	}{
		{"far apart", 50, 3},
		{"overlapping", 9, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuffer(t, 2, 6)
			m := newModel(2, 6)
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			a := &adder{t: t, m: m, w: w}
			eps := &episodes{rng: rand.New(rand.NewPCG(7, 7)), next: make([]tensorbuf.StepType, 2)}
			for i := range max(tc.adds0, tc.adds1) {
				var rows []int
				if i < tc.adds0 {
					rows = append(rows, 0)
				}
				if i < tc.adds1 {
					rows = append(rows, 1)
				}
				meta := make([]rawStep, len(rows))
				for k, r := range rows {
					meta[k] = eps.step(r)
				}
				a.add(rows, meta)
			}
			checkExport(t, b, m)
		})
	}
}
