package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestFrameStackSequenceBadInput: a bad stack request (issue 45 item 5)
// fails with ErrConfig, changes neither the batch passed nor the buffer
// or table, and consumes no draw: later samples are those of twins that
// never saw the bad requests.
func TestFrameStackSequenceBadInput(t *testing.T) {
	const capacity = 8
	ctx := context.Background()
	scripts := []stackRow{parseStackRow("F M M M L F M M M"), parseStackRow("F M M T F M")}
	mk := func() (*tensorbuf.Buffer, *tensorbuf.Table) {
		b := newStackBuffer(t, nil, 2, capacity)
		writeStackRows(t, b, scripts)
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Uniform, Seed: 4, MaxTimesSampled: 3})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for p := b.Oldest(r); p+2 <= b.Cursor(r); p++ {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 2, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return b, tbl
	}
	b, tbl := mk()
	twinB, twinT := mk()
	good := []tensorbuf.FrameStack{{Field: "frame", K: 4}}
	direct, fromTable := new(tensorbuf.Batch), new(tensorbuf.Batch)
	if err := b.SampleSequencesInto(direct, 8, 3, tensorbuf.SequenceOptions{Stack: good}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.SampleStackedInto(ctx, fromTable, 4, good); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		twinB.SampleSequencesInto(new(tensorbuf.Batch), 8, 3, tensorbuf.SequenceOptions{Stack: good}),
		twinT.SampleStackedInto(ctx, new(tensorbuf.Batch), 4, good),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	directBefore, tableBefore := batchBytes(t, hostSeqBatch(t, direct), ""), batchBytes(t, hostSeqBatch(t, fromTable), "")
	frameBefore, sizeBefore := direct.Fields["frame"], tbl.Size()
	for _, tc := range []struct {
		name  string
		stack []tensorbuf.FrameStack
		l     int
		table bool // the table refuses it too (it has no L of its own)
	}{
		{"K 0", []tensorbuf.FrameStack{{Field: "frame", K: 0}}, 3, true},
		{"K negative", []tensorbuf.FrameStack{{Field: "frame", K: -4}}, 3, true},
		{"K above the capacity", []tensorbuf.FrameStack{{Field: "frame", K: capacity + 1}}, 1, true},
		{"unknown field", []tensorbuf.FrameStack{{Field: "pixels", K: 4}}, 3, true},
		{"built-in column", []tensorbuf.FrameStack{{Field: tensorbuf.RewardName, K: 4}}, 3, true},
		{"action", []tensorbuf.FrameStack{{Field: "act", K: 4}}, 3, true},
		{"field twice", []tensorbuf.FrameStack{{Field: "frame", K: 4}, {Field: "frame", K: 2}}, 3, true},
		{"stack past the window", []tensorbuf.FrameStack{{Field: "frame", K: 4}}, capacity - 2, false},
		{"stack past the window, K the capacity", []tensorbuf.FrameStack{{Field: "frame", K: capacity}}, 2, false},
	} {
		err := b.SampleSequencesInto(direct, 8, tc.l, tensorbuf.SequenceOptions{Stack: tc.stack})
		if !errors.Is(err, tensorbuf.ErrConfig) {
			t.Errorf("%s: SampleSequencesInto: %v, want ErrConfig", tc.name, err)
		}
		if tc.name == "unknown field" && !errors.Is(err, tensorbuf.ErrUnknownField) {
			t.Errorf("%s: %v, want ErrUnknownField too", tc.name, err)
		}
		if tc.table {
			if err := tbl.SampleStackedInto(ctx, fromTable, 4, tc.stack); !errors.Is(err, tensorbuf.ErrConfig) {
				t.Errorf("%s: Table.SampleStackedInto: %v, want ErrConfig", tc.name, err)
			}
		}
	}
	if batchBytes(t, hostSeqBatch(t, direct), "") != directBefore || direct.Fields["frame"] != frameBefore {
		t.Fatal("a refused direct sample changed the batch passed to it")
	}
	if batchBytes(t, hostSeqBatch(t, fromTable), "") != tableBefore || tbl.Size() != sizeBefore {
		t.Fatal("a refused table sample changed the batch passed to it or the table")
	}
	// No draw consumed: the next samples are the twins'.
	for range 3 {
		x, y := new(tensorbuf.Batch), new(tensorbuf.Batch)
		if err := b.SampleSequencesInto(x, 8, 3, tensorbuf.SequenceOptions{Stack: good}); err != nil {
			t.Fatal(err)
		}
		if err := twinB.SampleSequencesInto(y, 8, 3, tensorbuf.SequenceOptions{Stack: good}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x.Items, y.Items) {
			t.Fatalf("refused direct samples consumed draws: %v, twin %v", x.Items, y.Items)
		}
		if err := tbl.SampleStackedInto(ctx, x, 4, good); err != nil {
			t.Fatal(err)
		}
		if err := twinT.SampleStackedInto(ctx, y, 4, good); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x.Keys, y.Keys) || tbl.Size() != twinT.Size() {
			t.Fatalf("refused table samples consumed draws: %v, twin %v", x.Keys, y.Keys)
		}
	}
	// Past the sample limit: refused before drawing.
	if err := b.SampleSequencesInto(direct, 1<<30, 3, tensorbuf.SequenceOptions{Stack: good}); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("a sample of 2^30 stacked windows: %v, want ErrInvalidArg", err)
	}
}

// TestFrameStackSequenceConcurrent: stacked direct and table samplers on
// distinct batches run beside a writer (for the race detector); every
// sample stays consistent with the frames' row bytes.
func TestFrameStackSequenceConcurrent(t *testing.T) {
	const capacity = 16
	b := newStackBuffer(t, nil, 3, capacity) // rows 0 and 1 scripted, row 2 written meanwhile
	writeStackRows(t, b, randomStackRows(rand.New(rand.NewPCG(1, 2)), 2, capacity))
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Uniform, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: b.Oldest(r) + 4, Len: 4, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
	stack := []tensorbuf.FrameStack{{Field: "frame", K: 4}}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for g := range 2 {
		wg.Go(func() {
			bt := new(tensorbuf.Batch)
			defer bt.Release()
			for range 50 {
				var err error
				if g == 0 {
					err = b.SampleSequencesInto(bt, 8, 4, tensorbuf.SequenceOptions{Stack: stack})
				} else {
					err = tbl.SampleStackedInto(context.Background(), bt, 8, stack)
				}
				if err != nil && !errors.Is(err, tensorbuf.ErrEmpty) {
					errs <- err
					return
				}
				if err == nil {
					hb, err := bt.Host()
					if err != nil {
						errs <- err
						return
					}
					frames := hb.Fields["frame"].Data().([]uint8)
					for i, it := range hb.Items {
						for j := range 4 * 4 {
							if f := frames[(i*16+j)*2:]; f[0] != 0 && int(f[1]) != 10+it.Row {
								errs <- fmt.Errorf("item %+v frame %d of row byte %d", it, j, f[1])
								return
							}
						}
					}
				}
			}
		})
	}
	wg.Go(func() {
		w, err := b.NewWriter(2)
		if err != nil {
			errs <- err
			return
		}
		for p := range 40 {
			st := tensorbuf.Mid
			if p%7 == 0 {
				st = tensorbuf.First
			}
			err := w.Add(&tensorbuf.Step{
				StepType: []tensorbuf.StepType{st}, NextStepType: []tensorbuf.StepType{tensorbuf.Mid},
				Reward: []float32{0}, Discount: []float32{1},
				Values: map[string]*tensor.Dense{
					"frame": tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]uint8{uint8(p + 1), 12})),
					"vec":   tensor.New(tensor.WithShape(1, 3), tensor.WithBacking(make([]float32, 3))),
					"act":   tensor.New(tensor.WithShape(1), tensor.WithBacking([]int32{0})),
				},
			})
			if err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestFrameStackSequenceAllocs: a stacked sequence sample into a batch
// whose memory is large enough allocates no more than the same sample
// unstacked (nothing, for the direct sampler and a host-selected table).
func TestFrameStackSequenceAllocs(t *testing.T) {
	b := newStackBuffer(t, nil, 4, 64)
	writeStackRows(t, b, randomStackRows(rand.New(rand.NewPCG(1, 2)), 4, 200))
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Uniform, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		for p := b.Oldest(r); p+4 <= b.Cursor(r); p++ {
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 4, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	stack := []tensorbuf.FrameStack{{Field: "frame", K: 4}}
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	for name, f := range map[string]func() error{
		"SampleSequencesInto": func() error { return b.SampleSequencesInto(bt, 32, 4, tensorbuf.SequenceOptions{Stack: stack}) },
		"episode-aware": func() error {
			return b.SampleSequencesInto(bt, 32, 4, tensorbuf.SequenceOptions{EpisodeAware: true, Stack: stack})
		},
		"Table.SampleStackedInto": func() error { return tbl.SampleStackedInto(ctx, bt, 32, stack) },
	} {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := testing.AllocsPerRun(50, func() {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
}

// TestFrameStackSequenceDevicePriorities: a stacked sample of a
// Prioritized DeviceSelection table, selected on the host, draws with the
// priorities UpdatePrioritiesDevice set (the host learns them first): the
// same keys and weights as a host table given the same priorities.
func TestFrameStackSequenceDevicePriorities(t *testing.T) {
	const capacity = 16
	b := newStackBuffer(t, nil, 2, capacity)
	scripts := []stackRow{parseStackRow("F M M M L F M M M M M M"), parseStackRow("F M M M M M M T F M M")}
	writeStackRows(t, b, scripts)
	ctx := context.Background()
	var tables [2]*tensorbuf.Table
	var keys []uint64
	for i, dev := range []bool{true, false} {
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint(dev), Selector: tensorbuf.Prioritized, Beta: 0.5, Seed: 3, DeviceSelection: dev})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for p := b.Oldest(r); p+3 <= b.Cursor(r); p++ {
				k, err := tbl.Insert(tensorbuf.Item{Row: r, Start: p, Len: 3, Priority: 1})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					keys = append(keys, k)
				}
			}
		}
		tables[i] = tbl
	}
	prios := make([]float32, len(keys))
	for i := range prios {
		prios[i] = 0.01
	}
	prios[3] = 1000 // nearly every draw
	be := b.Backend()
	upload := func(raw []byte, dt tensor.Dtype, n int) *tensor.Dense {
		a, err := be.Alloc(int64(len(raw)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Free(a) })
		if err := be.Upload(a, 0, raw); err != nil {
			t.Fatal(err)
		}
		d, err := be.Tensor(a, 0, dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	kt := upload(unsafe.Slice((*byte)(unsafe.Pointer(&keys[0])), 8*len(keys)), tensor.Uint64, len(keys))
	pt := upload(unsafe.Slice((*byte)(unsafe.Pointer(&prios[0])), 4*len(prios)), tensor.Float32, len(prios))
	if err := tables[0].UpdatePrioritiesDevice(kt, pt); err != nil {
		t.Fatal(err)
	}
	p64 := make([]float64, len(prios))
	for i, p := range prios {
		p64[i] = float64(p)
	}
	if err := tables[1].UpdatePriorities(keys, p64); err != nil {
		t.Fatal(err)
	}
	stack := []tensorbuf.FrameStack{{Field: "frame", K: 3}}
	x, y := new(tensorbuf.Batch), new(tensorbuf.Batch)
	defer x.Release()
	defer y.Release()
	if err := tables[0].SampleStackedInto(ctx, x, 16, stack); err != nil {
		t.Fatal(err)
	}
	if err := tables[1].SampleStackedInto(ctx, y, 16, stack); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Keys, y.Keys) || !slices.Equal(x.Weights, y.Weights) || !slices.Contains(x.Keys, keys[3]) {
		t.Fatalf("device table drew %v (weights %v), host table %v (weights %v)", x.Keys, x.Weights, y.Keys, y.Weights)
	}
	checkSeqBatch(t, "device priorities", hostSeqBatch(t, x), scripts, capacity, 3)
}
