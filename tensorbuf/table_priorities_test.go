package tensorbuf_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

func priorities(t *testing.T, tbl *tensorbuf.Table) []float64 {
	t.Helper()
	bt, err := tbl.All()
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	var ps []float64
	for _, it := range bt.Items {
		ps = append(ps, it.Priority)
	}
	return ps
}

// TestDefaultPriorityIsRunningMax walks the running maximum through
// inserts and updates, float64 and float32, and explicit zeros.
func TestDefaultPriorityIsRunningMax(t *testing.T) {
	for _, sel := range []tensorbuf.Selector{tensorbuf.Prioritized, tensorbuf.Uniform} {
		t.Run(sel.String(), func(t *testing.T) {
			b := newBuffer(t, 1, 16)
			fill(t, b, newModel(1, 16), [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2)})
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: sel})
			if err != nil {
				t.Fatal(err)
			}
			ins := func(p float64) uint64 {
				t.Helper()
				k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2, Priority: p})
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
			k0 := ins(tensorbuf.DefaultPriority) // fresh table: 1
			ins(0)                               // explicit 0 leaves the maximum unset
			ins(tensorbuf.DefaultPriority)       // still 1
			ins(0.01)                            // the first positive priority given
			ins(tensorbuf.DefaultPriority)       // 0.01, not 1
			if err := tbl.UpdatePriorities32([]uint64{k0}, []float32{100}); err != nil {
				t.Fatal(err)
			}
			ins(tensorbuf.DefaultPriority) // 100
			if err := tbl.UpdatePriorities([]uint64{k0}, []float64{3}); err != nil {
				t.Fatal(err)
			}
			ins(tensorbuf.DefaultPriority) // the maximum never decreases: 100
			want := []float64{3, 0, 1, 0.01, 0.01, 100, 100}
			if got := priorities(t, tbl); !slices.Equal(got, want) {
				t.Fatalf("priorities %v, want %v", got, want)
			}
			if got := tbl.MaxPriority(); got != 100 {
				t.Fatalf("MaxPriority %v, want 100", got)
			}
		})
	}
}

// TestPriorityValidation: other negative values, NaN and infinities are
// refused, by Insert and both updates, changing nothing.
func TestPriorityValidation(t *testing.T) {
	b := newBuffer(t, 1, 16)
	fill(t, b, newModel(1, 16), [][]rawStep{mids(1, 0), mids(1, 1)})
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: tensorbuf.Prioritized})
	if err != nil {
		t.Fatal(err)
	}
	k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2, Priority: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []float64{-2, -0.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2, Priority: p}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Errorf("Insert priority %v: %v", p, err)
		}
		if err := tbl.UpdatePriorities([]uint64{k}, []float64{p}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Errorf("UpdatePriorities %v: %v", p, err)
		}
		if err := tbl.UpdatePriorities32([]uint64{k, k}, []float32{5, float32(p)}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Errorf("UpdatePriorities32 %v: %v", p, err)
		}
	}
	if err := tbl.UpdatePriorities32([]uint64{k}, []float32{1, 2}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("UpdatePriorities32 length mismatch: %v", err)
	}
	if err := tbl.UpdatePriorities32([]uint64{k + 1<<40}, []float32{1}); !errors.Is(err, tensorbuf.ErrUnknownKey) {
		t.Errorf("UpdatePriorities32 unknown key: %v", err)
	}
	if got := priorities(t, tbl); !slices.Equal(got, []float64{2}) || tbl.Size() != 1 || tbl.MaxPriority() != 2 {
		t.Fatalf("after refused calls: priorities %v, size %d, max %v", got, tbl.Size(), tbl.MaxPriority())
	}
}

// TestUpdatePriorities32AllocatesNothing and moves the sampling
// distribution as float64 updates do.
func TestUpdatePriorities32AllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in the full run")
	}
	b := newBuffer(t, 1, 16)
	fill(t, b, newModel(1, 16), [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2)})
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: tensorbuf.Prioritized})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for s := range int64(2) {
		k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: s, Len: 1, Priority: tensorbuf.DefaultPriority})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	ps := []float32{0, 0.5}
	if n := testing.AllocsPerRun(50, func() {
		if err := tbl.UpdatePriorities32(keys, ps); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("UpdatePriorities32: %v allocations per call", n)
	}
	bt, err := tbl.Sample(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	for i, it := range bt.Items {
		if it.Start != 1 || bt.Probabilities[i] != 1 {
			t.Fatalf("draw %d: item %+v probability %v: priority 0 was drawn", i, it, bt.Probabilities[i])
		}
	}
}
