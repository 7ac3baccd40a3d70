package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// seqStack returns the K frames of step j of item i of a host batch
// field shaped [n, L, K, 2] as step+1 values (0 for a zero frame),
// checking each frame's row byte.
func seqStack(t testing.TB, d *tensor.Dense, i, j, row int) []int {
	t.Helper()
	sh := d.Shape()
	if len(sh) != 4 || sh[3] != 2 {
		t.Fatalf("stacked sequence shape %v, want [n, L, K, 2]", sh)
	}
	return stackOf(t, d, i*sh[1]+j, row) // stackOf reads [.., K, 2] frames by flat index
}

// modelWindow returns the stacks (step+1 values) of the l steps of an
// item of a row from the model of FrameStack's doc comment: real steps
// j < length get modelStack's frames, pad steps K zeros; lost reports
// whether the first step's stack reaches an overwritten step.
func modelWindow(s stackRow, capacity int, start, length, l, k int) (stacks [][]int, lost bool) {
	for j := range l {
		if j >= length {
			stacks = append(stacks, make([]int, k))
			continue
		}
		f, lo := modelStack(s, capacity, start+j, k)
		if j == 0 {
			lost = lo
		}
		stacks = append(stacks, f)
	}
	return stacks, lost
}

// checkSeqBatch checks every item of a host batch against the model: the
// stacked frames of every step, the unstacked action of every step (100 *
// row + step, 0 on pad steps) and the mask.
func checkSeqBatch(t testing.TB, what string, hb *tensorbuf.Batch, scripts []stackRow, capacity, k int) {
	t.Helper()
	n, l := hb.Len()
	if got, want := hb.Fields["frame"].Shape(), (tensor.Shape{n, l, k, 2}); !slices.Equal(got, want) {
		t.Fatalf("%s: frame shape %v, want %v", what, got, want)
	}
	if got, want := hb.Fields["vec"].Shape(), (tensor.Shape{n, l, 3}); !slices.Equal(got, want) {
		t.Fatalf("%s: vec shape %v, want %v", what, got, want)
	}
	acts, mask := hb.Fields["act"].Data().([]int32), hb.Mask.Data().([]bool)
	for i, it := range hb.Items {
		want, _ := modelWindow(scripts[it.Row], capacity, int(it.Start), it.Len, l, k)
		for j := range l {
			if got := seqStack(t, hb.Fields["frame"], i, j, it.Row); !slices.Equal(got, want[j]) {
				t.Fatalf("%s: item %d %+v step %d: frames %v, want %v (script %v)", what, i, it, j, got, want[j], scripts[it.Row].types)
			}
			wantAct := int32(0)
			if j < it.Len {
				wantAct = int32(100*it.Row) + int32(it.Start) + int32(j)
			}
			if acts[i*l+j] != wantAct || mask[i*l+j] != (j < it.Len) {
				t.Fatalf("%s: item %d %+v step %d: action %d mask %v", what, i, it, j, acts[i*l+j], mask[i*l+j])
			}
		}
	}
}

func hostSeqBatch(t testing.TB, bt *tensorbuf.Batch) *tensorbuf.Batch {
	t.Helper()
	h, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFrameStackSequenceEdges: the exact stacked frames of every step of
// table-sampled sequence items at each edge (a FIFO table sampled once
// per item, in insertion order): stack [a b c d] lists step+1 of each
// frame, oldest first, 0 for a zero frame.
func TestFrameStackSequenceEdges(t *testing.T) {
	type item struct {
		row      int
		start    int64
		len, pad int
		want     [][]int // per step of the batch (L = the longest item)
		valid    bool
	}
	tests := []struct {
		name     string
		scripts  []string
		capacity int
		k        int
		items    []item
	}{
		{"episode start", []string{"F M M M M L"}, 16, 4, []item{
			{0, 0, 3, 0, [][]int{{0, 0, 0, 1}, {0, 0, 1, 2}, {0, 1, 2, 3}}, true},
			{0, 2, 3, 0, [][]int{{0, 1, 2, 3}, {1, 2, 3, 4}, {2, 3, 4, 5}}, true},
		}},
		{"k larger than the episode, window across an episode start", []string{"F M L F M L"}, 16, 6, []item{
			{0, 0, 6, 0, [][]int{{0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 1, 2}, {0, 0, 0, 1, 2, 3}, {0, 0, 0, 0, 0, 4}, {0, 0, 0, 0, 4, 5}, {0, 0, 0, 4, 5, 6}}, true},
		}},
		{"terminal and truncation", []string{"F M L F M T F M"}, 16, 3, []item{
			// The boundary step of a terminated (L) and of a truncated (T)
			// episode holds its own final frames; the next episode's first
			// step starts from zeros.
			{0, 1, 4, 0, [][]int{{0, 1, 2}, {1, 2, 3}, {0, 0, 4}, {0, 4, 5}}, true},
			{0, 4, 4, 0, [][]int{{0, 4, 5}, {4, 5, 6}, {0, 0, 7}, {0, 7, 8}}, true},
		}},
		{"wrap-around and overwritten frames", []string{"F M M M M M M M M L"}, 6, 3, []item{
			// Steps 4..9 are stored (slots wrap); step 3 is overwritten.
			{0, 6, 4, 0, [][]int{{5, 6, 7}, {6, 7, 8}, {7, 8, 9}, {8, 9, 10}}, true},
			{0, 5, 2, 0, [][]int{{0, 5, 6}, {5, 6, 7}, {0, 0, 0}, {0, 0, 0}}, false},
			{0, 4, 1, 0, [][]int{{0, 0, 5}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, false},
		}},
		{"episode start inside the overwritten history", []string{"F M M M L F M M M M"}, 6, 4, []item{
			// Stored: steps 4..9; step 5 is First, so the stacks of 5.. lose nothing.
			{0, 5, 3, 0, [][]int{{0, 0, 0, 6}, {0, 0, 6, 7}, {0, 6, 7, 8}}, true},
			{0, 4, 2, 0, [][]int{{0, 0, 0, 5}, {0, 0, 0, 6}, {0, 0, 0, 0}}, false},
		}},
		{"a cut", []string{"F M M | M M M"}, 16, 4, []item{
			{0, 1, 4, 0, [][]int{{0, 0, 1, 2}, {0, 1, 2, 3}, {0, 0, 0, 4}, {0, 0, 4, 5}}, true},
		}},
		{"a cut just before the oldest stored step", []string{"F M M | M M M M"}, 4, 3, []item{
			// Stored: steps 3..6. The cut mark went with step 2, so step
			// 3's stack counts as lost although its frames are all known.
			{0, 3, 2, 0, [][]int{{0, 0, 4}, {0, 4, 5}}, false},
			{0, 4, 2, 0, [][]int{{0, 4, 5}, {4, 5, 6}}, false},
			{0, 5, 2, 0, [][]int{{4, 5, 6}, {5, 6, 7}}, true},
		}},
		{"pad steps are zeros", []string{"F M M L"}, 16, 4, []item{
			{0, 2, 2, 2, [][]int{{0, 1, 2, 3}, {1, 2, 3, 4}, {0, 0, 0, 0}, {0, 0, 0, 0}}, true},
		}},
		{"row boundaries", []string{"F M M M M", "M M M"}, 16, 3, []item{
			// Row 1 starts mid-episode: frames before its first step are
			// zeros, never row 0's.
			{1, 0, 3, 0, [][]int{{0, 0, 1}, {0, 1, 2}, {1, 2, 3}}, true},
			{0, 2, 3, 0, [][]int{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}}, true},
		}},
		{"K 1", []string{"F M L F"}, 16, 1, []item{
			{0, 1, 3, 0, [][]int{{2}, {3}, {4}}, true},
		}},
		{"K the capacity", []string{"F M M M M M"}, 4, 4, []item{
			// Stored: steps 2..5.
			{0, 3, 2, 0, [][]int{{0, 0, 3, 4}, {0, 3, 4, 5}}, false},
			{0, 5, 1, 0, [][]int{{3, 4, 5, 6}, {0, 0, 0, 0}}, true},
		}},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scripts := make([]stackRow, len(tc.scripts))
			for r, s := range tc.scripts {
				scripts[r] = parseStackRow(s)
			}
			b := newStackBuffer(t, nil, len(scripts), tc.capacity)
			writeStackRows(t, b, scripts)
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "seq", Selector: tensorbuf.FIFO, MaxTimesSampled: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range tc.items {
				if _, err := tbl.Insert(tensorbuf.Item{Row: it.row, Start: it.start, Len: it.len, Pad: it.pad, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
			bt := new(tensorbuf.Batch)
			defer bt.Release()
			if err := tbl.SampleStackedInto(ctx, bt, len(tc.items), []tensorbuf.FrameStack{{Field: "frame", K: tc.k}}); err != nil {
				t.Fatal(err)
			}
			hb := hostSeqBatch(t, bt)
			n, l := hb.Len()
			if n != len(tc.items) || len(hb.Valid) != n {
				t.Fatalf("%d items, %d valid flags, want %d", n, len(hb.Valid), len(tc.items))
			}
			for i, it := range tc.items {
				if got := hb.Items[i]; got.Row != it.row || got.Start != it.start {
					t.Fatalf("item %d is %+v, want row %d start %d", i, got, it.row, it.start)
				}
				if len(it.want) != l {
					t.Fatalf("item %d: the case lists %d steps, the batch has %d", i, len(it.want), l)
				}
				for j := range l {
					if got := seqStack(t, hb.Fields["frame"], i, j, it.row); !slices.Equal(got, it.want[j]) {
						t.Errorf("item %d step %d: frames %v, want %v", i, j, got, it.want[j])
					}
				}
				if hb.Valid[i] != it.valid {
					t.Errorf("item %d: valid %v, want %v", i, hb.Valid[i], it.valid)
				}
			}
			// The model agrees with every listed case.
			checkSeqBatch(t, tc.name, hb, scripts, tc.capacity, tc.k)
		})
	}
}

// TestFrameStackSequenceDirect: on random rows of random episodes, cuts
// and ring wrap-around, every directly sampled stacked window (episode
// aware or not) holds the frames the model says at every step, never
// starts where its first step's stack reaches an overwritten step, and,
// over enough draws, every window the model keeps is drawn.
func TestFrameStackSequenceDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 16 {
		rows, capacity := 1+rng.IntN(3), 6+rng.IntN(10)
		k := 1 + rng.IntN(min(6, capacity))
		l := 1 + rng.IntN(capacity-k+1)
		aware := rng.IntN(2) == 0
		scripts := randomStackRows(rng, rows, l+rng.IntN(3*capacity))
		name := fmt.Sprintf("trial %d: %d rows, capacity %d, K %d, L %d, episode-aware %v", trial, rows, capacity, k, l, aware)
		b := newStackBuffer(t, nil, rows, capacity)
		writeStackRows(t, b, scripts)
		kept := map[[2]int64]bool{}
		for r, s := range scripts {
			for p := max(0, len(s.types)-capacity); p+l <= len(s.types); p++ {
				_, lost := modelStack(s, capacity, p, k)
				boundary := s.types[p] == tensorbuf.Last || s.cut[p]
				if !lost && (!aware || !boundary) {
					kept[[2]int64{int64(r), int64(p)}] = true
				}
			}
		}
		opt := tensorbuf.SequenceOptions{EpisodeAware: aware, Stack: []tensorbuf.FrameStack{{Field: "frame", K: k}}}
		bt := new(tensorbuf.Batch)
		err := b.SampleSequencesInto(bt, 64, l, opt)
		if len(kept) == 0 {
			if !errors.Is(err, tensorbuf.ErrEmpty) {
				t.Fatalf("%s: no window kept, sample: %v", name, err)
			}
			continue
		}
		seen := map[[2]int64]bool{}
		for call := range 8 {
			if call > 0 {
				err = b.SampleSequencesInto(bt, 64, l, opt)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			hb := hostSeqBatch(t, bt)
			for i, it := range hb.Items {
				key := [2]int64{int64(it.Row), it.Start}
				if !kept[key] {
					t.Fatalf("%s: drew window %+v, which the model leaves out", name, it)
				}
				seen[key] = true
				if !hb.Valid[i] {
					t.Fatalf("%s: a direct sample returned an invalid window %+v", name, it)
				}
				wantLen := l
				if aware {
					s := scripts[it.Row]
					for j := range l {
						if s.types[int(it.Start)+j] == tensorbuf.Last || s.cut[int(it.Start)+j] {
							wantLen = j + 1
							break
						}
					}
				}
				if it.Len != wantLen {
					t.Fatalf("%s: window %+v: Len %d, want %d", name, it, it.Len, wantLen)
				}
			}
			checkSeqBatch(t, name, hb, scripts, capacity, k)
		}
		if len(seen) != len(kept) {
			for w := range kept {
				if !seen[w] {
					t.Errorf("%s: window %v never drawn (script %v)", name, w, scripts[w[0]].types)
				}
			}
			t.Fatalf("%s: drew %d of the %d windows kept", name, len(seen), len(kept))
		}
		_ = bt.Release()
	}
}

// TestFrameStackSequenceTable: random sequence items (padded or not) of
// random rows sampled from a uniform table hold the frames the model
// says, Valid false exactly where the first step's stack reaches an
// overwritten step; every other tensor, and the draws, are those of the
// same sample without stacking from a twin table of the same seed.
func TestFrameStackSequenceTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ctx := context.Background()
	for trial := range 12 {
		rows, capacity := 1+rng.IntN(3), 6+rng.IntN(10)
		k := 1 + rng.IntN(min(6, capacity))
		scripts := randomStackRows(rng, rows, capacity+rng.IntN(2*capacity))
		name := fmt.Sprintf("trial %d: %d rows, capacity %d, K %d", trial, rows, capacity, k)
		b := newStackBuffer(t, nil, rows, capacity)
		writeStackRows(t, b, scripts)
		var tables [2]*tensorbuf.Table
		for i := range tables {
			var err error
			if tables[i], err = b.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint(i), Selector: tensorbuf.Uniform, Seed: 11}); err != nil {
				t.Fatal(err)
			}
		}
		items := rng.IntN(20) + 1
		for range items {
			r := rng.IntN(rows)
			start := b.Oldest(r) + rng.Int64N(b.Cursor(r)-b.Oldest(r))
			it := tensorbuf.Item{Row: r, Start: start, Len: 1 + rng.IntN(int(min(5, b.Cursor(r)-start))), Priority: 1}
			it.Pad = rng.IntN(min(3, capacity-it.Len+1))
			for _, tbl := range tables {
				if _, err := tbl.Insert(it); err != nil {
					t.Fatal(err)
				}
			}
		}
		stacked, plain := new(tensorbuf.Batch), new(tensorbuf.Batch)
		if err := tables[0].SampleStackedInto(ctx, stacked, 24, []tensorbuf.FrameStack{{Field: "frame", K: k}}); err != nil {
			t.Fatal(err)
		}
		if err := tables[1].SampleInto(ctx, plain, 24); err != nil {
			t.Fatal(err)
		}
		hs, hp := hostSeqBatch(t, stacked), hostSeqBatch(t, plain)
		checkSeqBatch(t, name, hs, scripts, capacity, k)
		for i, it := range hs.Items {
			_, lost := modelWindow(scripts[it.Row], capacity, int(it.Start), it.Len, 1, k)
			if hs.Valid[i] == lost {
				t.Fatalf("%s: item %+v: valid %v, model lost %v", name, it, hs.Valid[i], lost)
			}
		}
		if !slices.Equal(hs.Keys, hp.Keys) || !slices.Equal(hs.Weights, hp.Weights) || len(hp.Valid) != 0 {
			t.Fatalf("%s: stacked draws %v, plain %v (plain valid %v)", name, hs.Keys, hp.Keys, hp.Valid)
		}
		if a, c := batchBytes(t, hs, "frame"), batchBytes(t, hp, "frame"); a != c {
			t.Fatalf("%s: the unstacked tensors differ:\n%s\nwithout stacking:\n%s", name, a, c)
		}
		_, _ = stacked.Release(), plain.Release()
	}
}

// batchBytes renders every tensor of a host batch but the field skip.
func batchBytes(t testing.TB, hb *tensorbuf.Batch, skip string) string {
	t.Helper()
	var sb strings.Builder
	names := []string{"frame", "vec", "act", tensorbuf.StepTypeName, tensorbuf.NextStepTypeName, tensorbuf.RewardName, tensorbuf.DiscountName, tensorbuf.MaskName}
	for _, name := range names {
		if name == skip {
			continue
		}
		d, err := hb.Field(name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s %v %v\n", name, d.Shape(), d.Data())
	}
	return sb.String()
}

// TestFrameStackSequenceLayouts: one Batch reused for stacked, unstacked
// and differently stacked samples, direct and from tables (a
// DeviceSelection table among them), takes the layout each asks for;
// a DeviceSelection table serves a stacked sample by selecting on the
// host (the same items as its host-selected twin) and an unstacked one on
// the backend again.
func TestFrameStackSequenceLayouts(t *testing.T) {
	const capacity = 12
	scripts := []stackRow{parseStackRow("F M M M L F M M M M M T F M M M"), parseStackRow("F M M | M M M L F M M M M M")}
	b := newStackBuffer(t, nil, 2, capacity)
	writeStackRows(t, b, scripts)
	ctx := context.Background()
	mk := func(name string, dev bool) *tensorbuf.Table {
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: name, Selector: tensorbuf.Uniform, Seed: 5, DeviceSelection: dev})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for p := b.Oldest(r); p+3 <= b.Cursor(r); p += 2 {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 3, Pad: 1, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return tbl
	}
	dev, host := mk("dev", true), mk("host", false)
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	stack := func(k int) []tensorbuf.FrameStack { return []tensorbuf.FrameStack{{Field: "frame", K: k}} }
	for step, k := range []int{4, 0, 2, 2, 0, 5} {
		var opt tensorbuf.SequenceOptions
		if k > 0 {
			opt.Stack = stack(k)
		}
		if err := b.SampleSequencesInto(bt, 16, 3, opt); err != nil {
			t.Fatal(err)
		}
		hb := hostSeqBatch(t, bt)
		if k == 0 {
			if got := hb.Fields["frame"].Shape(); !slices.Equal(got, tensor.Shape{16, 3, 2}) || len(hb.Valid) != 0 {
				t.Fatalf("step %d: unstacked frame shape %v, valid %v", step, got, hb.Valid)
			}
			continue
		}
		checkSeqBatch(t, fmt.Sprintf("direct step %d", step), hb, scripts, capacity, k)
		// The same batch from both tables.
		if err := dev.SampleStackedInto(ctx, bt, 8, stack(k)); err != nil {
			t.Fatal(err)
		}
		if bt.KeyTensor != nil || len(bt.Keys) != 8 {
			t.Fatalf("step %d: a stacked DeviceSelection sample selected on the backend (KeyTensor %v, %d keys)", step, bt.KeyTensor, len(bt.Keys))
		}
		hd := hostSeqBatch(t, bt)
		checkSeqBatch(t, fmt.Sprintf("device-selected table step %d", step), hd, scripts, capacity, k)
		if err := host.SampleStackedInto(ctx, bt, 8, stack(k)); err != nil {
			t.Fatal(err)
		}
		hh := hostSeqBatch(t, bt)
		if !slices.Equal(hd.Items, hh.Items) || batchBytes(t, hd, "") != batchBytes(t, hh, "") || !slices.Equal(hd.Valid, hh.Valid) {
			t.Fatalf("step %d: the DeviceSelection table's stacked sample differs from its host-selected twin's", step)
		}
	}
	// Unstacked again on the DeviceSelection table: selected on the backend.
	if err := dev.SampleInto(ctx, bt, 8); err != nil {
		t.Fatal(err)
	}
	if bt.KeyTensor == nil || len(bt.Valid) != 0 {
		t.Fatalf("an unstacked DeviceSelection sample: KeyTensor %v, valid %v", bt.KeyTensor, bt.Valid)
	}
	if got := bt.Fields["frame"].Shape(); !slices.Equal(got, tensor.Shape{8, 4, 2}) {
		t.Fatalf("unstacked frame shape %v", got)
	}
	// FixedLen pads a stacked table sample as it pads any: zero stacks.
	fixed := &tensorbuf.Batch{FixedLen: 6}
	defer fixed.Release()
	if err := host.SampleStackedInto(ctx, fixed, 8, stack(3)); err != nil {
		t.Fatal(err)
	}
	hf := hostSeqBatch(t, fixed)
	if n, l := hf.Len(); n != 8 || l != 6 {
		t.Fatalf("FixedLen 6: batch of %d x %d", n, l)
	}
	checkSeqBatch(t, "FixedLen", hf, scripts, capacity, 3)
}
