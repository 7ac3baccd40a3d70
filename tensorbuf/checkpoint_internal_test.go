package tensorbuf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/trajring/trajring/cpu"
)

var ckptFields = []Field{
	{Name: "obs", Role: Observation, DType: Float32, Shape: []int{3}},
	{Name: "pix", Role: Observation, DType: Uint8, Shape: []int{2, 2}},
	{Name: "act", Role: Action, DType: Int64},
}

// ckptVal is the value of element e of field f at step pos of a row.
func ckptVal(f, row int, pos int64, e int) float64 {
	return float64((row*131 + int(pos)*17 + e*7 + f*3) % 251)
}

// ckptStep builds one batched step of every row at the given positions;
// the step types follow episodes of length 5 + row.
func ckptStep(rows []int, pos []int64) *Step { return ckptStepOf(ckptFields, rows, pos) }

// ckptStepOf is ckptStep of a buffer of fields (of float32, uint8 and
// int64 elements), field f's elements being ckptVal(f, ...).
func ckptStepOf(fields []Field, rows []int, pos []int64) *Step {
	s := &Step{Rows: rows, Values: map[string]*tensor.Dense{}}
	for i, r := range rows {
		ep := int64(5 + r)
		st, next := Mid, Mid
		switch {
		case pos[i]%ep == 0:
			st = First
		case pos[i]%ep == ep-1:
			st = Last
		}
		switch {
		case st == Last:
			next = First
		case pos[i]%ep == ep-2:
			next = Last
		}
		s.StepType = append(s.StepType, st)
		s.NextStepType = append(s.NextStepType, next)
		s.Reward = append(s.Reward, float32(pos[i]%7))
		d := float32(1)
		if next == Last && r%2 == 0 {
			d = 0
		}
		s.Discount = append(s.Discount, d)
	}
	for f, fd := range fields {
		n := fd.Elems()
		shape := append([]int{len(rows)}, fd.Shape...)
		switch fd.DType {
		case Float32:
			x := make([]float32, 0, len(rows)*n)
			for i, r := range rows {
				for e := range n {
					x = append(x, float32(ckptVal(f, r, pos[i], e)))
				}
			}
			s.Values[fd.Name] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x))
		case Uint8:
			x := make([]uint8, 0, len(rows)*n)
			for i, r := range rows {
				for e := range n {
					x = append(x, uint8(ckptVal(f, r, pos[i], e)))
				}
			}
			s.Values[fd.Name] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x))
		case Int64:
			x := make([]int64, 0, len(rows)*n)
			for i, r := range rows {
				for e := range n {
					x = append(x, int64(ckptVal(f, r, pos[i], e)))
				}
			}
			s.Values[fd.Name] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x))
		}
	}
	return s
}

// ckptAdd adds n batched steps to every row of w (rows at their cursors).
func ckptAdd(t testing.TB, b *Buffer, w *Writer, n int) {
	t.Helper()
	rows := w.Rows()
	for range n {
		pos := make([]int64, len(rows))
		for i, r := range rows {
			pos[i] = b.Cursor(r)
		}
		if err := w.Add(ckptStepOf(b.Fields(), rows, pos)); err != nil {
			t.Fatal(err)
		}
	}
}

// ckptTables are one table of each selector, with every option that
// carries state.
var ckptTables = []TableConfig{
	{Name: "uniform", Selector: Uniform, MaxSize: 40, Seed: 11},
	{Name: "per", Selector: Prioritized, PriorityExponent: 0.6, Beta: 0.4, Seed: 12},
	{Name: "fifo", Selector: FIFO, MaxTimesSampled: 3, Seed: 13,
		RateLimiter: &RateLimiter{MinSize: 1, SamplesPerInsert: 2, ErrorBuffer: 1000, Timeout: time.Second}},
	{Name: "lifo", Selector: LIFO, MaxTimesSampled: 2, Seed: 14},
}

// newCkptBuffer builds a buffer with wrapped rows, a cut, items in every
// table, updated priorities, sampled and deleted items.
func newCkptBuffer(t testing.TB, be Backend, envs, capacity, steps int) *Buffer {
	t.Helper()
	return newCkptBufferOf(t, Config{NumEnvs: envs, Capacity: capacity, Fields: ckptFields, Backend: be, Seed: 7}, steps)
}

// newCkptBufferOf is newCkptBuffer of cfg (ckptFields, or fields that
// include them).
func newCkptBufferOf(t testing.TB, cfg Config, steps int) *Buffer {
	t.Helper()
	envs := cfg.NumEnvs
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	var tabs []*Table
	for _, c := range ckptTables {
		tb, err := b.NewTable(c)
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tb)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := range steps {
		ckptAdd(t, b, w, 1)
		if i == steps/2 && envs > 1 {
			// A cut: row 1 restarts an episode in the middle of one.
			s := ckptStepOf(b.Fields(), []int{1}, []int64{b.Cursor(1)})
			s.StepType[0], s.NextStepType[0] = First, Mid
			if err := w.Add(s); err != nil {
				t.Fatal(err)
			}
		}
		for _, tb := range tabs {
			row := rng.IntN(envs)
			l := 1 + rng.IntN(3)
			if b.Cursor(row)-b.Oldest(row) < int64(l) {
				continue
			}
			p := DefaultPriority
			if rng.IntN(3) == 0 {
				p = rng.Float64() * 3
			}
			key, err := tb.Insert(Item{Row: row, Start: b.Cursor(row) - int64(l), Len: l, Pad: rng.IntN(2), Priority: p})
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(10) == 0 {
				tb.Delete(key)
			}
		}
		if i%5 == 4 {
			for _, tb := range tabs {
				bt, err := tb.Sample(ctx, 2)
				if err != nil {
					t.Fatal(err)
				}
				if tb.cfg.Selector == Prioritized {
					ps := []float32{float32(rng.Float64()), 0.25}
					if err := tb.UpdatePriorities32(bt.Keys, ps); err != nil {
						t.Fatal(err)
					}
				}
				_ = bt.Release()
			}
		}
	}
	if _, err := b.SampleSequences(3, 2, SequenceOptions{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// stateString describes everything a checkpoint must restore, exactly:
// arenas, metadata, cursors, stats, rng states and every table's
// structures (slots, lists, heaps, sum tree), with the fields of free
// slots that no code reads left out.
func stateString(t testing.TB, b *Buffer) string {
	t.Helper()
	b.mu.RLock()
	defer b.mu.RUnlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "envs %d cap %d fields %v\ncursor %v\nstats %+v\n", b.numEnvs, b.capacity, b.Fields(), b.cursor, b.stats)
	fmt.Fprintf(&sb, "meta %x\n", sha256.Sum256(b.meta))
	fmt.Fprintf(&sb, "seed %d calls %d\n", b.seed, b.calls.Load())
	for i := range b.arenas {
		raw := make([]byte, b.arenas[i].arena.Size())
		if err := b.be.Download(raw, b.arenas[i].arena, 0); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "arena %d (stride %d) %x\n", i, b.arenas[i].stride, sha256.Sum256(raw))
	}
	for _, tb := range b.tableList {
		tb.mu.Lock()
		cfg := tb.cfg
		cfg.RateLimiter = nil
		fmt.Fprintf(&sb, "table %+v rl %+v a %v\n", cfg, tb.cfg.RateLimiter, tb.a)
		if err := tb.checkHotLocked(); err != nil {
			t.Errorf("table %q: %v", tb.cfg.Name, err)
		}
		items := slices.Clone(tb.items)
		tb.foldHot(items) // whole times-sampled counts, as a save writes them
		for s, it := range items {
			if it.live {
				fmt.Fprintf(&sb, " slot %d gen %d %+v\n", s, tb.gens[s], it)
			} else {
				fmt.Fprintf(&sb, " slot %d gen %d free key %d\n", s, tb.gens[s], it.key)
			}
		}
		fmt.Fprintf(&sb, " free %v live %v head %d tail %d\n", tb.free, tb.live, tb.head, tb.tail)
		for r, h := range tb.starts {
			if len(h) > 0 {
				fmt.Fprintf(&sb, " heap %d %v\n", r, []startEntry(h))
			}
		}
		fmt.Fprintf(&sb, " tree n %d sum %v min %v\n", tb.tree.n, tb.tree.sum, tb.tree.min)
		fmt.Fprintf(&sb, " nextKey %d maxLen %d budget %d inserts %d samples %d max %v %v calls %d\n",
			tb.nextKey, tb.maxLen, tb.budget, tb.inserts, tb.samples, tb.maxPriority, tb.hasMaxPriority, tb.calls)
		tb.mu.Unlock()
	}
	return sb.String()
}

// denseString prints a host tensor's data.
func denseString(d *tensor.Dense) string {
	if d == nil {
		return "nil"
	}
	return fmt.Sprint(d.Shape(), d.Data())
}

// batchString prints a batch through a host copy (device tensors of cuda
// builds must not be read on the host).
func batchString(bt *Batch) string {
	bt, err := bt.Host()
	if err != nil {
		return "host copy: " + err.Error()
	}
	defer bt.Release()
	var sb strings.Builder
	fmt.Fprintf(&sb, "items %v keys %v p %v w %v size %d\n", bt.Items, bt.Keys, bt.Probabilities, bt.Weights, bt.TableSize)
	names := make([]string, 0, len(bt.Fields))
	for n := range bt.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&sb, "%s %s\n", n, denseString(bt.Fields[n]))
	}
	for _, d := range []*tensor.Dense{bt.StepType, bt.NextStepType, bt.Reward, bt.Discount, bt.Mask} {
		sb.WriteString(denseString(d) + "\n")
	}
	return sb.String()
}

// transitionsString prints transitions through a host copy.
func transitionsString(tr *Transitions) string {
	tr, err := tr.Host()
	if err != nil {
		return "host copy: " + err.Error()
	}
	defer tr.Release()
	var sb strings.Builder
	fmt.Fprintf(&sb, "rows %v steps %v\n", tr.Rows, tr.Steps)
	for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo, tr.NextObservation} {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&sb, "%s %s\n", n, denseString(m[n]))
		}
	}
	for _, d := range []*tensor.Dense{tr.Reward, tr.Discount, tr.IsDone} {
		sb.WriteString(denseString(d) + "\n")
	}
	return sb.String()
}

// behaviour runs the same reads and samples on a buffer and returns
// what they gave: the full export, every table's contents (All) and the
// next samples of every selector and of the direct samplers.
func behaviour(t testing.TB, b *Buffer) string {
	t.Helper()
	var sb strings.Builder
	exp, err := b.AllExperiences(ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range exp {
		sb.WriteString("export " + transitionsString(tr))
		_ = tr.Release()
	}
	for _, c := range ckptTables {
		tb, err := b.Table(c.Name)
		if err != nil {
			t.Fatal(err)
		}
		all, err := tb.All()
		if err != nil {
			t.Fatal(err)
		}
		sb.WriteString("all " + c.Name + " " + batchString(all))
		_ = all.Release()
		for range 3 {
			bt, err := tb.Sample(context.Background(), 2)
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString("sample " + c.Name + " " + batchString(bt))
			_ = bt.Release()
		}
	}
	seq, err := b.SampleSequences(4, 3, SequenceOptions{EpisodeAware: true})
	if err != nil {
		t.Fatal(err)
	}
	sb.WriteString("sequences " + batchString(seq))
	tr, err := b.SampleTransitions(5)
	if err != nil {
		t.Fatal(err)
	}
	sb.WriteString("transitions " + transitionsString(tr))
	return sb.String()
}

func saveBytes(t testing.TB, b *Buffer, opts SaveOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Save(&buf, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %.300s\n want %.300s", i, bl[i], al[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

// TestCheckpointRoundTrip saves a buffer with every kind of state, loads
// it (plain and compressed, every snapshot mode) and checks that the
// restored state is the original's exactly and that both then export and
// sample exactly the same.
func TestCheckpointRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts SaveOptions
	}{
		{"plain-auto", SaveOptions{}},
		{"zstd-copy", SaveOptions{Compress: true, Snapshot: SnapshotCopy}},
		{"plain-lock", SaveOptions{Snapshot: SnapshotLock}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := newCkptBuffer(t, nil, 3, 16, 60)
			want := stateString(t, orig)
			var rep SaveReport
			tc.opts.Report = &rep
			data := saveBytes(t, orig, tc.opts)
			if rep.Bytes != int64(len(data)) || rep.Copied != (tc.opts.Snapshot == SnapshotCopy) {
				t.Fatalf("report %+v for %d bytes", rep, len(data))
			}
			if got := stateString(t, orig); got != want {
				t.Fatalf("Save changed the buffer: %s", firstDiff(want, got))
			}
			loaded, err := Load(bytes.NewReader(data), LoadOptions{Backend: cpu.New()})
			if err != nil {
				t.Fatal(err)
			}
			defer loaded.Close()
			if got := stateString(t, loaded); got != want {
				t.Fatalf("restored state differs: %s", firstDiff(want, got))
			}
			wb, gb := behaviour(t, orig), behaviour(t, loaded)
			if gb != wb {
				t.Fatalf("restored buffer behaves differently: %s", firstDiff(wb, gb))
			}
			// And they stay equal once written to further.
			for _, b := range []*Buffer{orig, loaded} {
				w, err := b.NewWriter()
				if err != nil {
					t.Fatal(err)
				}
				ckptAdd(t, b, w, 9)
				_ = w.Close()
			}
			if got, want := stateString(t, loaded), stateString(t, orig); got != want {
				t.Fatalf("after more steps: %s", firstDiff(want, got))
			}
		})
	}
}
