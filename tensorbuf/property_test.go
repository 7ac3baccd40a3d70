package tensorbuf_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// episodes generates TF-Agents step types per row: episodes of random
// length, each closed by a boundary step (Last -> First).
type episodes struct {
	rng  *rand.Rand
	next []tensorbuf.StepType
}

func (e *episodes) step(r int) rawStep {
	s := rawStep{st: e.next[r], reward: float32(e.rng.IntN(1000)), discount: 1}
	switch {
	case s.st == tensorbuf.Last:
		s.next = tensorbuf.First
	case e.rng.IntN(10) < 3:
		s.next = tensorbuf.Last
		if e.rng.IntN(2) == 0 {
			s.discount = 0
		}
	default:
		s.next = tensorbuf.Mid
	}
	e.next[r] = s.next
	return s
}

func isDone(s rawStep) float64 {
	switch {
	case s.next != tensorbuf.Last:
		return 0
	case s.discount == 0:
		return 1
	}
	return 2
}

// TestPropertyAgainstModel runs random partial adds, item inserts, table
// samples, direct samples and exports on small capacities and checks every
// result against the slice-of-steps model: wrap-around, padding and item
// eviction included.
func TestPropertyAgainstModel(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(25) {
		rng := rand.New(rand.NewPCG(seed, 42))
		envs, capacity := 1+rng.IntN(3), 2+rng.IntN(6)
		b := newBuffer(t, envs, capacity)
		m := newModel(envs, capacity)
		w, err := b.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		a := &adder{t: t, m: m, w: w}
		eps := &episodes{rng: rng, next: make([]tensorbuf.StepType, envs)}
		sel := tensorbuf.Selector(seed % 4)
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: sel, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		items := map[uint64]tensorbuf.Item{}
		var order []uint64 // insertion order of live keys
		for op := range 400 {
			switch rng.IntN(5) {
			case 0, 1: // partial add of a random subset of rows, in random order
				rows := rng.Perm(envs)[:1+rng.IntN(envs)]
				meta := make([]rawStep, len(rows))
				for i, r := range rows {
					meta[i] = eps.step(r)
				}
				a.add(rows, meta)
				for k, it := range items {
					if it.Start < m.oldest(it.Row) {
						delete(items, k)
						order = slices.DeleteFunc(order, func(x uint64) bool { return x == k })
					}
				}
			case 2: // insert a random valid item
				r := rng.IntN(envs)
				if m.cursor(r) == 0 {
					continue
				}
				start := m.oldest(r) + rng.Int64N(m.cursor(r)-m.oldest(r))
				n := 1 + rng.IntN(int(m.cursor(r)-start))
				it := tensorbuf.Item{Row: r, Start: start, Len: n, Pad: rng.IntN(capacity - n + 1), Priority: 1 + float64(rng.IntN(3))}
				k, err := tbl.Insert(it)
				if err != nil {
					t.Fatalf("seed %d op %d: insert %+v: %v", seed, op, it, err)
				}
				items[k] = it
				order = append(order, k)
			case 3: // sample the table
				if len(items) == 0 {
					if _, err := tbl.Sample(ctx, 1); err == nil {
						t.Fatalf("seed %d op %d: sampled an empty table", seed, op)
					}
					continue
				}
				n := 1 + rng.IntN(4)
				bt, err := tbl.Sample(ctx, n)
				if err != nil {
					t.Fatalf("seed %d op %d: %v", seed, op, err)
				}
				hb, err := bt.Host()
				if err != nil {
					t.Fatal(err)
				}
				if hb.TableSize != len(items) {
					t.Fatalf("seed %d op %d: table size %d, model %d", seed, op, hb.TableSize, len(items))
				}
				for i, k := range hb.Keys {
					it, ok := items[k]
					if !ok || it != hb.Items[i] {
						t.Fatalf("seed %d op %d: sampled key %d item %+v, model has %+v (%v)", seed, op, k, hb.Items[i], it, ok)
					}
					checkWindow(t, m, hb, i, it.Row, it.Start, it.Len)
				}
				if sel == tensorbuf.FIFO && hb.Keys[0] != order[0] || sel == tensorbuf.LIFO && hb.Keys[0] != order[len(order)-1] {
					t.Fatalf("seed %d op %d: %v sampled key %d, order %v", seed, op, sel, hb.Keys[0], order)
				}
			case 4: // direct samples
				l := 1 + rng.IntN(capacity)
				aware := rng.IntN(2) == 0
				bt, err := b.SampleSequences(3, l, tensorbuf.SequenceOptions{EpisodeAware: aware})
				if err != nil {
					continue // ErrEmpty is checked in the table-driven tests
				}
				hb, err := bt.Host()
				if err != nil {
					t.Fatal(err)
				}
				for i, it := range hb.Items {
					if it.Start < m.oldest(it.Row) || it.Start+int64(l) > m.cursor(it.Row) {
						t.Fatalf("seed %d op %d: window %+v crosses the stored steps", seed, op, it)
					}
					want := l
					if aware {
						if m.steps[it.Row][it.Start].st == tensorbuf.Last {
							t.Fatalf("seed %d op %d: episode-aware window starts at a boundary", seed, op)
						}
						for k := range l {
							if m.steps[it.Row][it.Start+int64(k)].st == tensorbuf.Last {
								want = k + 1
								break
							}
						}
					}
					if it.Len != want || it.Pad != l-want {
						t.Fatalf("seed %d op %d: window %+v, want len %d", seed, op, it, want)
					}
					checkWindow(t, m, hb, i, it.Row, it.Start, it.Len)
				}
				if tr, err := b.SampleTransitions(4); err == nil {
					checkTransitions(t, m, tr)
				}
			}
			if tbl.Size() != len(items) {
				t.Fatalf("seed %d op %d: table size %d, model %d", seed, op, tbl.Size(), len(items))
			}
		}
		if len(items) > 0 {
			all, err := tbl.All()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(all.Keys, order) {
				t.Fatalf("seed %d: All keys %v, want %v", seed, all.Keys, order)
			}
			hb, _ := all.Host()
			for i, k := range order {
				checkWindow(t, m, hb, i, items[k].Row, items[k].Start, items[k].Len)
			}
		}
		checkExport(t, b, m)
	}
}

// checkTransitions verifies sampled transitions against the model.
func checkTransitions(t testing.TB, m *model, tr *tensorbuf.Transitions) {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range h.Rows {
		s := h.Steps[i]
		if s < m.oldest(r) || s+1 >= m.cursor(r) || m.steps[r][s].st == tensorbuf.Last {
			t.Fatalf("transition at row %d step %d is not valid", r, s)
		}
		checkTransition(t, m, h, i, i, r, s)
	}
}

// checkTransition compares transition i of h (element j of its tensors)
// with the model's step s of row r.
func checkTransition(t testing.TB, m *model, h *tensorbuf.Transitions, i, j, r int, s int64) {
	t.Helper()
	want := m.steps[r][s]
	if got := floats(t, h.Reward)[j]; got != float64(want.reward) {
		t.Fatalf("transition %d: reward %v, want %v", i, got, want.reward)
	}
	if got := floats(t, h.Discount)[j]; got != float64(want.discount) {
		t.Fatalf("transition %d: discount %v, want %v", i, got, want.discount)
	}
	if got := floats(t, h.IsDone)[j]; got != isDone(want) {
		t.Fatalf("transition %d: is_done %v, want %v", i, got, isDone(want))
	}
	for f, fd := range testFields {
		var d = h.Observation[fd.Name]
		switch fd.Role {
		case tensorbuf.Action:
			d = h.Action[fd.Name]
		case tensorbuf.PolicyInfo:
			d = h.PolicyInfo[fd.Name]
		}
		e := fd.Elems()
		got := floats(t, d)
		for k := range e {
			if got[j*e+k] != val(f, r, s, k) {
				t.Fatalf("transition %d: %s[%d] = %v, want %v", i, fd.Name, k, got[j*e+k], val(f, r, s, k))
			}
		}
		if fd.Role == tensorbuf.Observation {
			got := floats(t, h.NextObservation[fd.Name])
			for k := range e {
				if got[j*e+k] != val(f, r, s+1, k) {
					t.Fatalf("transition %d: next %s[%d] = %v, want %v", i, fd.Name, k, got[j*e+k], val(f, r, s+1, k))
				}
			}
		}
	}
}

// checkExport compares AllExperiences in every mode with the model's
// transitions, time-major then env.
func checkExport(t testing.TB, b *tensorbuf.Buffer, m *model) {
	t.Helper()
	type pos struct {
		s int64
		r int
	}
	var want []pos
	for r := range m.steps {
		for s := m.oldest(r); s+1 < m.cursor(r); s++ {
			if m.steps[r][s].st != tensorbuf.Last {
				want = append(want, pos{s, r})
			}
		}
	}
	sort.Slice(want, func(i, j int) bool {
		return want[i].s < want[j].s || want[i].s == want[j].s && want[i].r < want[j].r
	})
	for _, mode := range []tensorbuf.ExportMode{tensorbuf.ExportNone, tensorbuf.ExportBatch, tensorbuf.ExportSequence} {
		exp, err := b.AllExperiences(mode)
		if len(want) == 0 {
			if err == nil {
				t.Fatalf("mode %d: export of no transition succeeded", mode)
			}
			continue
		}
		if err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
		if mode == tensorbuf.ExportNone {
			if len(exp) != len(want) {
				t.Fatalf("none: %d experiences, want %d", len(exp), len(want))
			}
			for i, e := range exp {
				h, err := e.Host()
				if err != nil {
					t.Fatal(err)
				}
				if got := h.Reward.Shape(); !slices.Equal(got, []int{1, 1}) {
					t.Fatalf("none: reward shape %v", got)
				}
				if h.Rows[0] != want[i].r || h.Steps[0] != want[i].s {
					t.Fatalf("none: experience %d at (%d, %d), want %+v", i, h.Rows[0], h.Steps[0], want[i])
				}
				checkTransition(t, m, h, i, 0, want[i].r, want[i].s)
			}
			continue
		}
		h, err := exp[0].Host()
		if err != nil {
			t.Fatal(err)
		}
		shape := []int{len(want), 1}
		if mode == tensorbuf.ExportSequence {
			shape = []int{1, len(want)}
		}
		if got := h.Reward.Shape(); !slices.Equal(got, shape) {
			t.Fatalf("mode %d: reward shape %v, want %v", mode, got, shape)
		}
		if got := h.Observation["pix"].Shape(); !slices.Equal(got, append(shape, 2, 2)) {
			t.Fatalf("mode %d: pix shape %v", mode, got)
		}
		for i, p := range want {
			if h.Rows[i] != p.r || h.Steps[i] != p.s {
				t.Fatalf("mode %d: experience %d at (%d, %d), want %+v", mode, i, h.Rows[i], h.Steps[i], p)
			}
			checkTransition(t, m, h, i, i, p.r, p.s)
		}
		_ = exp[0].Release()
	}
}
