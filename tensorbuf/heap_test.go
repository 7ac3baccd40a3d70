package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// heapOp is one step of a scripted table test: sample n items, update
// the priorities of items (by insertion index), delete items, or insert
// one more item of priority ins.
type heapOp struct {
	sample int
	update map[int]float64 // applied in ascending index order
	upd    []int           // the order of update's indices
	del    []int
	ins    float64
	insert bool
}

// TestHeapSelectors pins MinHeap and MaxHeap: the lowest (highest)
// priority first, equal priorities least recently inserted or updated
// first (Reverb's tie-break), with MaxTimesSampled, updates, deletes,
// MaxSize eviction and DefaultPriority.
func TestHeapSelectors(t *testing.T) {
	minH, maxH := tensorbuf.MinHeap, tensorbuf.MaxHeap
	for _, tc := range []struct {
		name  string
		cfg   tensorbuf.TableConfig
		prios []float64
		ops   []heapOp
		want  []int // insertion indices of the sampled keys, all ops together
		size  int
	}{
		{"min keeps the lowest, oldest of a tie", tensorbuf.TableConfig{Selector: minH}, []float64{3, 1, 2, 1},
			[]heapOp{{sample: 3}}, []int{1, 1, 1}, 4},
		{"max keeps the highest, oldest of a tie", tensorbuf.TableConfig{Selector: maxH}, []float64{3, 1, 3, 2},
			[]heapOp{{sample: 3}}, []int{0, 0, 0}, 4},
		{"min drains in priority order", tensorbuf.TableConfig{Selector: minH, MaxTimesSampled: 1}, []float64{3, 1, 2, 1, 0.5},
			[]heapOp{{sample: 5}}, []int{4, 1, 3, 2, 0}, 0},
		{"max drains in priority order", tensorbuf.TableConfig{Selector: maxH, MaxTimesSampled: 1}, []float64{3, 1, 3, 2, 2},
			[]heapOp{{sample: 2}, {sample: 3}}, []int{0, 2, 3, 4, 1}, 0},
		{"min twice each", tensorbuf.TableConfig{Selector: minH, MaxTimesSampled: 2}, []float64{2, 1, 1},
			[]heapOp{{sample: 6}}, []int{1, 1, 2, 2, 0, 0}, 0},
		{"an update to the same priority goes behind its ties", tensorbuf.TableConfig{Selector: minH}, []float64{1, 1, 1},
			[]heapOp{{sample: 1}, {update: map[int]float64{0: 1}, upd: []int{0}}, {sample: 1},
				{update: map[int]float64{1: 1}, upd: []int{1}}, {sample: 1}}, []int{0, 1, 2}, 3},
		{"updates in the order given", tensorbuf.TableConfig{Selector: maxH}, []float64{1, 1, 1},
			[]heapOp{{update: map[int]float64{2: 5, 0: 5}, upd: []int{2, 0}}, {sample: 1}}, []int{2}, 3},
		{"max after lowering the top", tensorbuf.TableConfig{Selector: maxH}, []float64{1, 2, 3},
			[]heapOp{{update: map[int]float64{2: 0}, upd: []int{2}}, {sample: 2}}, []int{1, 1}, 3},
		{"min after deleting the top", tensorbuf.TableConfig{Selector: minH}, []float64{1, 2, 0.5},
			[]heapOp{{del: []int{2}}, {sample: 1}, {del: []int{0}}, {sample: 1}}, []int{0, 1}, 1},
		{"MaxSize evicts the oldest, not the top", tensorbuf.TableConfig{Selector: minH, MaxSize: 2}, []float64{0, 5},
			[]heapOp{{sample: 1}, {insert: true, ins: 6}, {sample: 1}}, []int{0, 1}, 2},
		{"a new item of equal priority comes after", tensorbuf.TableConfig{Selector: maxH}, []float64{4, 2},
			[]heapOp{{insert: true, ins: 4}, {sample: 1}, {del: []int{0}}, {sample: 1}}, []int{0, 2}, 2},
		{"DefaultPriority is the running maximum", tensorbuf.TableConfig{Selector: maxH}, []float64{2, 7, 3},
			[]heapOp{{insert: true, ins: tensorbuf.DefaultPriority}, {del: []int{1}}, {sample: 1}}, []int{3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "t"
			_, tbl, keys := tableWith(t, tc.cfg, tc.prios...)
			var got []uint64
			for _, op := range tc.ops {
				switch {
				case op.sample > 0:
					bt, err := tbl.Sample(context.Background(), op.sample)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range bt.Probabilities {
						if p != 1 {
							t.Fatalf("probability %v, want 1", p)
						}
					}
					got = append(got, bt.Keys...)
				case op.update != nil:
					var ks []uint64
					var ps []float64
					for _, i := range op.upd {
						ks, ps = append(ks, keys[i]), append(ps, op.update[i])
					}
					if err := tbl.UpdatePriorities(ks, ps); err != nil {
						t.Fatal(err)
					}
				case op.del != nil:
					for _, i := range op.del {
						tbl.Delete(keys[i])
					}
				case op.insert:
					k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: int64(len(keys) % 8), Len: 1, Priority: op.ins})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
			}
			var want []uint64
			for _, i := range tc.want {
				want = append(want, keys[i])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("keys %v, want %v (keys by insertion %v)", got, want, keys)
			}
			if tbl.Size() != tc.size {
				t.Fatalf("size %d, want %d", tbl.Size(), tc.size)
			}
		})
	}
}

// TestSelectorConfig: the new selectors have names, are refused on the
// backend (DeviceSelection), and PriorityExponent accepts
// PriorityExponentZero but no other negative value.
func TestSelectorConfig(t *testing.T) {
	for sel, name := range map[tensorbuf.Selector]string{
		tensorbuf.MinHeap: "min-heap", tensorbuf.MaxHeap: "max-heap", tensorbuf.WithoutReplacement: "without-replacement",
		tensorbuf.WithoutReplacement + 1: "Selector(7)",
	} {
		if sel.String() != name {
			t.Errorf("%d: %q, want %q", int(sel), sel.String(), name)
		}
	}
	b := newBuffer(t, 1, 8)
	for i, tc := range []struct {
		cfg  tensorbuf.TableConfig
		want error
	}{
		{tensorbuf.TableConfig{Selector: tensorbuf.MinHeap, DeviceSelection: true}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.MaxHeap, DeviceSelection: true}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.WithoutReplacement, DeviceSelection: true}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.WithoutReplacement + 1}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, PriorityExponent: -0.5}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, PriorityExponent: -2}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, PriorityExponent: -1}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, PriorityExponent: math.Inf(-1)}, tensorbuf.ErrConfig},
		{tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, PriorityExponent: tensorbuf.PriorityExponentZero}, nil},
		{tensorbuf.TableConfig{Selector: tensorbuf.WithoutReplacement}, nil},
		{tensorbuf.TableConfig{Selector: tensorbuf.MaxHeap}, nil},
	} {
		tc.cfg.Name = fmt.Sprint("t", i)
		if _, err := b.NewTable(tc.cfg); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%+v: %v, want %v", tc.cfg, err, tc.want)
		}
	}
}
