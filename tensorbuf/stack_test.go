package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// stackFields: a 2-byte frame (byte 0 is the step number + 1, so a zero
// frame is told from step 0's; byte 1 the row + 10), a float32 vector
// observation that is never stacked here, and an action.
var stackFields = []tensorbuf.Field{
	{Name: "frame", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{2}},
	{Name: "vec", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
	{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int32},
}

// stackRow is one row's script: tokens F, M (First, Mid), L (Last after a
// termination: the step before has discount 0), T (Last after a
// truncation: discount 1) and | (MarkCut after the step before).
type stackRow struct {
	types []tensorbuf.StepType
	last  []bool // step i ends its episode with a truncation (T)
	cut   []bool // MarkCut after step i
}

func parseStackRow(script string) stackRow {
	var r stackRow
	for _, tok := range strings.Fields(script) {
		switch tok {
		case "F", "M", "L", "T":
			r.types = append(r.types, map[string]tensorbuf.StepType{"F": tensorbuf.First, "M": tensorbuf.Mid, "L": tensorbuf.Last, "T": tensorbuf.Last}[tok])
			r.last = append(r.last, tok == "T")
			r.cut = append(r.cut, false)
		case "|":
			r.cut[len(r.cut)-1] = true
		default:
			panic("bad token " + tok)
		}
	}
	return r
}

// writeStackRows writes each row's script (row r gets scripts[r]) one
// step at a time, rows in turn.
func writeStackRows(t testing.TB, b *tensorbuf.Buffer, scripts []stackRow) {
	t.Helper()
	rows := make([]int, len(scripts))
	for r := range rows {
		rows[r] = r
	}
	w, err := b.NewWriter(rows...)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, s := range scripts {
		longest = max(longest, len(s.types))
	}
	for p := range longest {
		for r, s := range scripts {
			if p >= len(s.types) {
				continue
			}
			next := tensorbuf.Mid
			if p+1 < len(s.types) {
				next = s.types[p+1]
			} else if s.types[p] == tensorbuf.Last {
				next = tensorbuf.First
			}
			disc := float32(1)
			if next == tensorbuf.Last && !s.last[p+1] {
				disc = 0
			}
			step := &tensorbuf.Step{
				Rows: []int{r}, StepType: []tensorbuf.StepType{s.types[p]}, NextStepType: []tensorbuf.StepType{next},
				Reward: []float32{float32(p)}, Discount: []float32{disc},
				Values: map[string]*tensor.Dense{
					"frame": tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]uint8{uint8(p + 1), uint8(10 + r)})),
					"vec":   tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{float32(p), float32(r), 1})),
					"act":   tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{int32(100*r + p)})),
				},
			}
			if err := w.Add(step); err != nil {
				t.Fatalf("row %d step %d: %v", r, p, err)
			}
			if s.cut[p] {
				if err := w.MarkCut(r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// modelStack returns the K frames (step+1, 0 for a zero frame) that end
// at step t of a row, and whether one of them was overwritten, written
// from FrameStack's doc comment: frame p is zero when a later one of the
// K steps (p < q <= t) is First, a step p <= q < t is cut, or p < 0; it is
// lost when it is not zero and p < cursor-capacity, and also (the ring
// no longer holds the cut's mark) when it is zero only because an
// overwritten step p <= q < cursor-capacity was cut.
func modelStack(s stackRow, capacity int, t, k int) (frames []int, lost bool) {
	frames, lost = modelFrames(s, capacity, t, k)
	oldest := max(0, len(s.types)-capacity)
	for p := t - 1; p >= t-k+1 && !lost; p-- {
		if p < 0 || s.types[p+1] == tensorbuf.First {
			break
		}
		if p < oldest {
			lost = true // a cut mark the ring overwrote cannot stop the walk
		}
		if s.cut[p] {
			break
		}
	}
	return frames, lost
}

// modelFrames is modelStack without the overwritten cut marks.
func modelFrames(s stackRow, capacity int, t, k int) (frames []int, lost bool) {
	oldest := max(0, len(s.types)-capacity)
	for f := range k {
		p := t - (k - 1 - f)
		zero := p < 0
		for q := max(p, 0); q <= t && !zero; q++ {
			zero = (q > p && s.types[q] == tensorbuf.First) || (q < t && s.cut[q])
		}
		switch {
		case zero:
			frames = append(frames, 0)
		case p < oldest:
			frames = append(frames, 0)
			lost = true
		default:
			frames = append(frames, p+1)
		}
	}
	return frames, lost
}

// stackOf returns the stacked frames of transition i of host tensor d
// ([n, K, 2] or [n, 1, K, 2] uint8) as step+1 values, checking byte 1 (the row).
func stackOf(t testing.TB, d *tensor.Dense, i, row int) []int {
	t.Helper()
	sh := d.Shape()
	if len(sh) < 3 || sh[len(sh)-1] != 2 {
		t.Fatalf("stacked frame shape %v, want [n, (1,) K, 2]", sh)
	}
	k := sh[len(sh)-2]
	raw := d.Data().([]uint8)[i*k*2 : (i+1)*k*2]
	out := make([]int, k)
	for f := range k {
		out[f] = int(raw[2*f])
		if raw[2*f] == 0 && raw[2*f+1] != 0 || raw[2*f] != 0 && int(raw[2*f+1]) != 10+row {
			t.Fatalf("transition %d frame %d: bytes %v (row %d)", i, f, raw[2*f:2*f+2], row)
		}
	}
	return out
}

func newStackBuffer(t testing.TB, be tensorbuf.Backend, rows, capacity int) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: stackFields, Seed: 3, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// exportStacked exports every transition (one batch) with frame stacked
// over k and host copies.
func exportStacked(t testing.TB, b *tensorbuf.Buffer, opt tensorbuf.NStepOptions) *tensorbuf.Transitions {
	t.Helper()
	exp, err := b.AllNStepExperiences(tensorbuf.ExportBatch, opt)
	if err != nil {
		t.Fatal(err)
	}
	h, err := exp[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	_ = exp[0].Release()
	return h
}

// TestFrameStackEdges: the exact stacked frames of every transition at
// each edge, one row, K = 4 unless said: stack [a b c d] lists step+1 of
// each frame, oldest first, 0 for a zero frame.
func TestFrameStackEdges(t *testing.T) {
	type tr struct {
		step      int64
		obs, next []int
		done      uint8
	}
	tests := []struct {
		name     string
		script   string
		capacity int
		k        int
		horizon  int
		want     []tr // every exported transition, in order
	}{
		{"episode start and terminal", "F M M M M L", 16, 4, 1, []tr{
			{0, []int{0, 0, 0, 1}, []int{0, 0, 1, 2}, 0},
			{1, []int{0, 0, 1, 2}, []int{0, 1, 2, 3}, 0},
			{2, []int{0, 1, 2, 3}, []int{1, 2, 3, 4}, 0},
			{3, []int{1, 2, 3, 4}, []int{2, 3, 4, 5}, 0},
			{4, []int{2, 3, 4, 5}, []int{3, 4, 5, 6}, tensorbuf.Terminated},
		}},
		{"k larger than the episode", "F M L F M L", 16, 6, 1, []tr{
			{0, []int{0, 0, 0, 0, 0, 1}, []int{0, 0, 0, 0, 1, 2}, 0},
			{1, []int{0, 0, 0, 0, 1, 2}, []int{0, 0, 0, 1, 2, 3}, tensorbuf.Terminated},
			{3, []int{0, 0, 0, 0, 0, 4}, []int{0, 0, 0, 0, 4, 5}, 0},
			{4, []int{0, 0, 0, 0, 4, 5}, []int{0, 0, 0, 4, 5, 6}, tensorbuf.Terminated},
		}},
		{"truncation keeps the final frame", "F M T F M", 16, 4, 1, []tr{
			{0, []int{0, 0, 0, 1}, []int{0, 0, 1, 2}, 0},
			{1, []int{0, 0, 1, 2}, []int{0, 1, 2, 3}, tensorbuf.Truncated},
			{3, []int{0, 0, 0, 4}, []int{0, 0, 4, 5}, 0},
		}},
		{"k 1", "F M L", 16, 1, 1, []tr{
			{0, []int{1}, []int{2}, 0},
			{1, []int{2}, []int{3}, tensorbuf.Terminated},
		}},
		{"wrap-around drops overwritten stacks", "F M M M M M M M", 5, 4, 1, []tr{
			// steps 3..7 stored (slots 3 4 0 1 2); t = 3, 4, 5 reach steps < 3
			{6, []int{4, 5, 6, 7}, []int{5, 6, 7, 8}, 0},
		}},
		{"wrap-around with an episode start", "F M M L F M M M", 5, 4, 1, []tr{
			{4, []int{0, 0, 0, 5}, []int{0, 0, 5, 6}, 0},
			{5, []int{0, 0, 5, 6}, []int{0, 5, 6, 7}, 0},
			{6, []int{0, 5, 6, 7}, []int{5, 6, 7, 8}, 0},
		}},
		{"cut", "F M M | M M", 16, 4, 1, []tr{
			{0, []int{0, 0, 0, 1}, []int{0, 0, 1, 2}, 0},
			{1, []int{0, 0, 1, 2}, []int{0, 1, 2, 3}, 0},
			{3, []int{0, 0, 0, 4}, []int{0, 0, 4, 5}, 0},
		}},
		{"a cut mark the ring overwrote", "F M M | M M M M", 4, 3, 1, []tr{
			// Steps 3..6 stored; the cut after step 2 went with it, so the
			// stacks of 3 and 4 count as reaching an overwritten step.
			{5, []int{4, 5, 6}, []int{5, 6, 7}, 0},
		}},
		{"n-step looks ahead, not past the episode", "F M M M M L", 16, 4, 3, []tr{
			{0, []int{0, 0, 0, 1}, []int{1, 2, 3, 4}, 0},
			{1, []int{0, 0, 1, 2}, []int{2, 3, 4, 5}, 0},
			{2, []int{0, 1, 2, 3}, []int{3, 4, 5, 6}, tensorbuf.Terminated},
			{3, []int{1, 2, 3, 4}, []int{3, 4, 5, 6}, tensorbuf.Terminated},
			{4, []int{2, 3, 4, 5}, []int{3, 4, 5, 6}, tensorbuf.Terminated},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newStackBuffer(t, nil, 1, tc.capacity)
			writeStackRows(t, b, []stackRow{parseStackRow(tc.script)})
			opt := tensorbuf.NStepOptions{Horizon: tc.horizon, DiscountFactor: 1, Stack: []tensorbuf.FrameStack{{Field: "frame", K: tc.k}}}
			h := exportStacked(t, b, opt)
			if len(h.Steps) != len(tc.want) {
				t.Fatalf("exported steps %v, want %d transitions", h.Steps, len(tc.want))
			}
			if sh := h.Observation["vec"].Shape(); !slices.Equal(sh, tensor.Shape{len(tc.want), 1, 3}) {
				t.Fatalf("unstacked vec shape %v", sh)
			}
			done := h.IsDone.Data().([]uint8)
			for i, w := range tc.want {
				if h.Steps[i] != w.step {
					t.Fatalf("transition %d at step %d, want %d", i, h.Steps[i], w.step)
				}
				if got := stackOf(t, h.Observation["frame"], i, 0); !slices.Equal(got, w.obs) {
					t.Errorf("step %d: observation %v, want %v", w.step, got, w.obs)
				}
				if got := stackOf(t, h.NextObservation["frame"], i, 0); !slices.Equal(got, w.next) {
					t.Errorf("step %d: next observation %v, want %v", w.step, got, w.next)
				}
				if done[i] != w.done {
					t.Errorf("step %d: is_done %d, want %d", w.step, done[i], w.done)
				}
			}
		})
	}
}

// randomStackRows makes rows of random episodes (terminations,
// truncations, cuts), of n steps each.
func randomStackRows(rng *rand.Rand, rows, n int) []stackRow {
	out := make([]stackRow, rows)
	for r := range out {
		var sb strings.Builder
		sb.WriteString("F")
		prev := "F"
		for range n - 1 {
			var tok string
			switch {
			case prev == "L" || prev == "T":
				tok = "F"
			case rng.IntN(8) == 0:
				tok = "L"
			case rng.IntN(12) == 0:
				tok = "T"
			default:
				tok = "M"
			}
			sb.WriteString(" " + tok)
			if tok != "L" && tok != "T" && rng.IntN(20) == 0 {
				sb.WriteString(" |")
			}
			prev = tok
		}
		out[r] = parseStackRow(sb.String())
	}
	return out
}

// modelNext returns the step an n-step transition at t bootstraps from
// (t+k, k as NStepOptions says), limited to lim steps ahead.
func modelNext(s stackRow, t, h, lim int) int {
	k := min(h, len(s.types)-1-t, lim)
	for j := 1; j <= k; j++ {
		if s.cut[t+j-1] {
			return t + j - 1
		}
		if s.types[t+j] == tensorbuf.Last {
			return t + j
		}
	}
	return t + k
}

// isTransition reports whether step t of a row starts a transition.
func isTransition(s stackRow, capacity, t int) bool {
	return t >= max(0, len(s.types)-capacity) && t+1 < len(s.types) && s.types[t] != tensorbuf.Last && !s.cut[t]
}

// TestFrameStackModel: on random rows of random episodes, cuts and ring
// wrap-around, every exported, directly sampled and table-sampled
// stacked transition holds the frames the model says, for K 1..6 and
// horizons 1..3; exports and direct samples never hold a transition
// whose stack was overwritten, tables flag it Valid false.
func TestFrameStackModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 12 {
		rows, capacity := 1+rng.IntN(3), 6+rng.IntN(10)
		k, h := 1+rng.IntN(min(6, capacity)), 1+rng.IntN(3)
		scripts := randomStackRows(rng, rows, capacity+rng.IntN(2*capacity))
		name := fmt.Sprintf("trial %d: %d rows, capacity %d, K %d, horizon %d", trial, rows, capacity, k, h)
		b := newStackBuffer(t, nil, rows, capacity)
		writeStackRows(t, b, scripts)
		opt := tensorbuf.NStepOptions{Horizon: h, DiscountFactor: 0.5, Stack: []tensorbuf.FrameStack{{Field: "frame", K: k}}}
		check := func(what string, hc *tensorbuf.Transitions, i, row int, step int64, lim int, wantLost bool) {
			t.Helper()
			s := scripts[row]
			obs, lost := modelStack(s, capacity, int(step), k)
			if lost != wantLost {
				t.Fatalf("%s: %s %d (row %d step %d): lost %v", name, what, i, row, step, lost)
			}
			next, _ := modelStack(s, capacity, modelNext(s, int(step), h, lim), k)
			if lim == 0 {
				next = obs
			}
			if got := stackOf(t, hc.Observation["frame"], i, row); !slices.Equal(got, obs) {
				t.Fatalf("%s: %s %d (row %d step %d): observation %v, want %v (script %v)", name, what, i, row, step, got, obs, s.types)
			}
			if got := stackOf(t, hc.NextObservation["frame"], i, row); !slices.Equal(got, next) {
				t.Fatalf("%s: %s %d (row %d step %d): next %v, want %v", name, what, i, row, step, got, next)
			}
		}
		// Export: every transition whose stack is kept, no other.
		exp, err := b.AllNStepExperiences(tensorbuf.ExportBatch, opt)
		count := 0
		for r, s := range scripts {
			for p := range s.types {
				if _, lost := modelStack(s, capacity, p, k); isTransition(s, capacity, p) && !lost {
					count++
				}
			}
			_ = r
		}
		if count == 0 {
			if !errors.Is(err, tensorbuf.ErrEmpty) {
				t.Fatalf("%s: export of nothing: %v", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		he, err := exp[0].Host()
		if err != nil {
			t.Fatal(err)
		}
		_ = exp[0].Release()
		if len(he.Steps) != count {
			t.Fatalf("%s: exported %d transitions, want %d", name, len(he.Steps), count)
		}
		for i := range he.Steps {
			check("exported", he, i, he.Rows[i], he.Steps[i], h, false)
		}
		// Direct samples.
		tr := new(tensorbuf.Transitions)
		for range 3 {
			if err := b.SampleNStepInto(tr, 16, opt); err != nil {
				t.Fatal(err)
			}
			hs, err := tr.Host()
			if err != nil {
				t.Fatal(err)
			}
			for i := range hs.Steps {
				check("sampled", hs, i, hs.Rows[i], hs.Steps[i], h, false)
			}
		}
		_ = tr.Release()
		// A table of one item of h+1 steps (fewer at the cursor) per stored
		// step, boundary steps included.
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Uniform, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			for p := b.Oldest(r); p < b.Cursor(r); p++ {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: int(min(int64(h+1), b.Cursor(r)-p)), Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tt, err := tbl.SampleTransitions(context.Background(), 32, opt)
		if err != nil {
			t.Fatal(err)
		}
		ht, err := tt.Transitions.Host()
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range tt.Items {
			s := scripts[it.Row]
			p := int(it.Start)
			lim := it.Len - 1
			if s.types[p] == tensorbuf.Last || s.cut[p] {
				lim = 0
			}
			_, lost := modelStack(s, capacity, p, k)
			if want := lim > 0 && modelNext(s, p, h, lim) > p && !lost; tt.Valid[i] != want {
				t.Fatalf("%s: table item %+v: valid %v, want %v", name, it, tt.Valid[i], want)
			}
			if modelNext(s, p, h, lim) == p {
				lim = 0
			}
			check("table", ht, i, it.Row, it.Start, lim, lost)
		}
		_ = tt.Release()
	}
}

// hostBytes renders every tensor of host transitions, for exact
// comparison.
func hostBytes(t testing.TB, tr *tensorbuf.Transitions) string {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, m := range []map[string]*tensor.Dense{h.Observation, h.Action, h.PolicyInfo, h.NextObservation} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&sb, "%s %v %v\n", k, m[k].Shape(), m[k].Data())
		}
	}
	for _, d := range []*tensor.Dense{h.Reward, h.Discount, h.IsDone} {
		fmt.Fprintf(&sb, "%v %v\n", d.Shape(), d.Data())
	}
	return sb.String()
}

// TestFrameStackDeviceSelection: a DeviceSelection table's stacked
// transitions (drawn, checked and stacked on the backend: in cuda builds
// the gpu backend's kernels/stack_gather.cu, on the stand-in in CI) are
// byte for byte those of a host-selected table of the same seed, and those
// of the same table on the cpu backend (the reference), validity and
// masked weights included, items whose stacks the ring overwrote among
// them.
func TestFrameStackDeviceSelection(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, capacity = 3, 12
	scripts := randomStackRows(rng, rows, 30)
	ctx := context.Background()
	type side struct {
		b         *tensorbuf.Buffer
		dev, host *tensorbuf.Table
	}
	var sides []side
	for _, be := range []tensorbuf.Backend{cpu.New(), nil} {
		b := newStackBuffer(t, be, rows, capacity)
		writeStackRows(t, b, scripts)
		s := side{b: b}
		var err error
		if s.dev, err = b.NewTable(tensorbuf.TableConfig{Name: "dev", Selector: tensorbuf.Prioritized, PriorityExponent: 0.7, Beta: 0.5, Seed: 21, DeviceSelection: true}); err != nil {
			t.Fatal(err)
		}
		if s.host, err = b.NewTable(tensorbuf.TableConfig{Name: "host", Selector: tensorbuf.Prioritized, PriorityExponent: 0.7, Beta: 0.5, Seed: 21}); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			for p := b.Oldest(r); p < b.Cursor(r); p++ {
				it := tensorbuf.Item{Row: r, Start: p, Len: int(min(3, b.Cursor(r)-p)), Priority: float64(1 + (int(p)+r)%5)}
				for _, tb := range []*tensorbuf.Table{s.dev, s.host} {
					if _, err := tb.Insert(it); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		sides = append(sides, s)
	}
	lostSeen := false
	for _, k := range []int{1, 4, 7} {
		for _, h := range []int{1, 2} {
			opt := tensorbuf.NStepOptions{Horizon: h, DiscountFactor: 0.9, Stack: []tensorbuf.FrameStack{{Field: "frame", K: k}}}
			for round := range 4 {
				var ref string
				var refValid []bool
				for si, s := range sides {
					dt, err := s.dev.SampleTransitions(ctx, 24, opt)
					if err != nil {
						t.Fatal(err)
					}
					if err := dt.HostMeta(); err != nil {
						t.Fatal(err)
					}
					ht, err := s.host.SampleTransitions(ctx, 24, opt)
					if err != nil {
						t.Fatal(err)
					}
					if dt.MaskedWeightTensor == nil {
						t.Fatalf("backend %d: the DeviceSelection table did not select on the backend", si)
					}
					dbytes, hbytes := hostBytes(t, &dt.Transitions), hostBytes(t, &ht.Transitions)
					what := fmt.Sprintf("backend %d, K %d, horizon %d, round %d", si, k, h, round)
					if dbytes != hbytes {
						t.Fatalf("%s: device-selected and host-selected transitions differ:\n%s\n%s", what, dbytes, hbytes)
					}
					if !slices.Equal(dt.Valid, ht.Valid) || !slices.Equal(dt.Keys, ht.Keys) {
						t.Fatalf("%s: valid %v / %v, keys %v / %v", what, dt.Valid, ht.Valid, dt.Keys, ht.Keys)
					}
					hm := ht.MaskedWeights32(nil)
					dm := dt.MaskedWeights32(nil)
					if !slices.Equal(hm, dm) {
						t.Fatalf("%s: masked weights %v / %v", what, dm, hm)
					}
					for i, it := range ht.Items {
						if _, lost := modelStack(scripts[it.Row], capacity, int(it.Start), k); lost {
							lostSeen = true
							if ht.Valid[i] {
								t.Fatalf("%s: item %+v reaches overwritten frames but is valid", what, it)
							}
						}
					}
					if si == 0 {
						ref, refValid = dbytes, dt.Valid
					} else if dbytes != ref || !slices.Equal(refValid, dt.Valid) {
						t.Fatalf("%s: the default backend's transitions differ from the cpu backend's:\n%s\n%s", what, dbytes, ref)
					}
					_ = dt.Release()
					_ = ht.Release()
				}
			}
		}
	}
	if !lostSeen {
		t.Fatal("no sampled item reached overwritten frames: the test lost its edge")
	}
}

// TestFrameStackBadInput: a bad frame-stack request fails with ErrConfig
// and changes nothing: the transitions passed keep their tensors and
// bytes, a table consumes no item (its next sample is the one a twin
// table of the same seed draws first), hindsight refuses stacking.
func TestFrameStackBadInput(t *testing.T) {
	const capacity = 8
	b := newStackBuffer(t, nil, 2, capacity)
	writeStackRows(t, b, []stackRow{parseStackRow("F M M M L F M M M"), parseStackRow("F M M T F M")})
	ctx := context.Background()
	good := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: []tensorbuf.FrameStack{{Field: "frame", K: 4}}}
	mk := func(name string) *tensorbuf.Table {
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: name, Selector: tensorbuf.Uniform, Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for p := b.Oldest(r); p+1 < b.Cursor(r); p++ {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 2, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return tbl
	}
	tbl, twin := mk("a"), mk("b")
	tr := new(tensorbuf.Transitions)
	if err := b.SampleNStepInto(tr, 8, good); err != nil {
		t.Fatal(err)
	}
	before := hostBytes(t, tr)
	obsBefore := tr.Observation["frame"]
	tt := new(tensorbuf.TableTransitions)
	if err := tbl.SampleTransitionsInto(ctx, tt, 4, good); err != nil {
		t.Fatal(err)
	}
	if err := twin.SampleTransitionsInto(ctx, new(tensorbuf.TableTransitions), 4, good); err != nil {
		t.Fatal(err)
	}
	ttBefore := hostBytes(t, &tt.Transitions)
	for _, tc := range []struct {
		name  string
		stack []tensorbuf.FrameStack
	}{
		{"K 0", []tensorbuf.FrameStack{{Field: "frame", K: 0}}},
		{"K negative", []tensorbuf.FrameStack{{Field: "frame", K: -4}}},
		{"K above the capacity", []tensorbuf.FrameStack{{Field: "frame", K: capacity + 1}}},
		{"unknown field", []tensorbuf.FrameStack{{Field: "pixels", K: 4}}},
		{"built-in column", []tensorbuf.FrameStack{{Field: tensorbuf.RewardName, K: 4}}},
		{"action", []tensorbuf.FrameStack{{Field: "act", K: 4}}},
		{"field twice", []tensorbuf.FrameStack{{Field: "frame", K: 4}, {Field: "frame", K: 2}}},
	} {
		opt := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: tc.stack}
		if err := b.SampleNStepInto(tr, 8, opt); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("%s: SampleNStepInto: %v, want ErrConfig", tc.name, err)
		}
		if _, err := b.AllNStepExperiences(tensorbuf.ExportBatch, opt); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("%s: AllNStepExperiences: %v, want ErrConfig", tc.name, err)
		}
		if err := tbl.SampleTransitionsInto(ctx, tt, 4, opt); !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("%s: Table.SampleTransitionsInto: %v, want ErrConfig", tc.name, err)
		}
		if tc.name == "unknown field" {
			if err := b.SampleNStepInto(tr, 8, opt); !errors.Is(err, tensorbuf.ErrUnknownField) {
				t.Errorf("%s: %v, want ErrUnknownField too", tc.name, err)
			}
		}
	}
	if got := hostBytes(t, tr); got != before || tr.Observation["frame"] != obsBefore {
		t.Fatal("a refused sample changed the transitions passed to it")
	}
	if got := hostBytes(t, &tt.Transitions); got != ttBefore {
		t.Fatal("a refused table sample changed the transitions passed to it")
	}
	a, err := tbl.SampleTransitions(ctx, 4, good)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := twin.SampleTransitions(ctx, 4, good)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Keys, bb.Keys) || hostBytes(t, &a.Transitions) != hostBytes(t, &bb.Transitions) {
		t.Fatalf("refused samples consumed draws: keys %v, twin's %v", a.Keys, bb.Keys)
	}
	// A stacked sample that fails for want of transitions (an empty
	// buffer) leaves the unstacked transitions passed to it as they were.
	empty := newStackBuffer(t, nil, 1, capacity)
	plainTr := new(tensorbuf.Transitions)
	if err := b.SampleTransitionsInto(plainTr, 8); err != nil {
		t.Fatal(err)
	}
	plainBefore := hostBytes(t, plainTr)
	if err := empty.SampleNStepInto(plainTr, 8, good); !errors.Is(err, tensorbuf.ErrEmpty) {
		t.Fatalf("stacked sample of an empty buffer: %v, want ErrEmpty", err)
	}
	if hostBytes(t, plainTr) != plainBefore {
		t.Fatal("a stacked sample that failed changed the transitions passed to it")
	}
	// A sample of stacked frames past the sample limit is refused too.
	big := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: good.Stack}
	if err := b.SampleNStepInto(tr, 1<<40, big); err == nil {
		t.Fatal("a sample of 2^40 stacked transitions was served")
	}
}

// TestFrameStackMemory: the bytes per stored step of an Atari buffer
// (84x84 uint8 frames, int32 action) that FrameStack's doc comment states,
// within issue 45's budget of 7.5 GB for 1M transitions; stacking stores
// nothing.
func TestFrameStackMemory(t *testing.T) {
	const rows, capacity = 8, 1000
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: []tensorbuf.Field{
		{Name: "frame", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{84, 84}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int32},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	perStep := b.MemoryBytes() / (rows * capacity)
	if perStep != 7077 {
		t.Fatalf("%d bytes per stored step, FrameStack's doc says 7,077", perStep)
	}
	if perStep*1_000_000 > 7_500_000_000 {
		t.Fatalf("1M steps take %d bytes, over 7.5 GB", perStep*1_000_000)
	}
}

// TestFrameStackAllocs: stacked samples reusing their transitions
// allocate what unstacked ones do once sized: nothing for direct samples
// and host-selected tables (a device-selected table's transitions
// allocate the same few small objects with or without stacks).
func TestFrameStackAllocs(t *testing.T) {
	b := newStackBuffer(t, nil, 4, 64)
	writeStackRows(t, b, randomStackRows(rand.New(rand.NewPCG(1, 2)), 4, 200))
	ctx := context.Background()
	measure := func(stack []tensorbuf.FrameStack) map[string]float64 {
		opt := tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.9, Stack: stack}
		calls := map[string]func() error{}
		tr := new(tensorbuf.Transitions)
		calls["SampleNStepInto"] = func() error { return b.SampleNStepInto(tr, 32, opt) }
		for _, dev := range []bool{false, true} {
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint(dev, len(stack)), Selector: tensorbuf.Uniform, Seed: 2, DeviceSelection: dev})
			if err != nil {
				t.Fatal(err)
			}
			for r := range 4 {
				for p := b.Oldest(r); p+1 < b.Cursor(r); p++ {
					if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 2, Priority: 1}); err != nil {
						t.Fatal(err)
					}
				}
			}
			tt := new(tensorbuf.TableTransitions)
			calls[fmt.Sprintf("table SampleTransitionsInto (device selection %v)", dev)] = func() error { return tbl.SampleTransitionsInto(ctx, tt, 32, opt) }
		}
		got := map[string]float64{}
		for name, f := range calls {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got[name] = testing.AllocsPerRun(50, func() {
				if err := f(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			})
		}
		return got
	}
	plain, stacked := measure(nil), measure([]tensorbuf.FrameStack{{Field: "frame", K: 4}})
	for name, n := range stacked {
		if n != plain[name] || (!strings.Contains(name, "true") && n != 0) {
			t.Errorf("%s: %v allocations per call stacked, %v unstacked", name, n, plain[name])
		}
	}
}

// TestFrameStackHindsightRefused: hindsight relabeling does not stack
// frames; a HindsightConfig asking for it fails with ErrConfig.
func TestFrameStackHindsightRefused(t *testing.T) {
	b, _ := newGoalBuffer(t, nil, 16, nil)
	cfg := lineConfig(tensorbuf.GoalFinal, 1, tensorbuf.RelabelAtSample)
	cfg.NStep = tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: []tensorbuf.FrameStack{{Field: "obs", K: 2}}}
	if _, err := tensorbuf.NewHindsight(b, cfg); !errors.Is(err, tensorbuf.ErrConfig) {
		t.Fatalf("NewHindsight with NStep.Stack: %v, want ErrConfig", err)
	}
}
