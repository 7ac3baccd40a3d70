package tensorbuf

import (
	"bytes"
	"sync"
	"testing"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// cowStepBytes is the size of the "pix" field of the copy-on-write
// tests: 2 rows of 1024 steps make an 8 MiB arena, two chunks.
const cowStepBytes = 4096

func cowVal(r int, pos int64, j int) byte { return byte(pos*31 + int64(r)*7 + int64(j)) }

// cowAdd adds n steps to every row of w: pixels from cowVal, Mid steps.
func cowAdd(t testing.TB, b *Buffer, w *Writer, n int) {
	t.Helper()
	rows := w.Rows()
	for range n {
		raw := make([]byte, 0, len(rows)*cowStepBytes)
		for _, r := range rows {
			pos := b.Cursor(r)
			for j := range cowStepBytes {
				raw = append(raw, cowVal(r, pos, j))
			}
		}
		s := &Step{Rows: rows, Values: map[string]*tensor.Dense{
			"pix": tensor.New(tensor.WithShape(len(rows), cowStepBytes), tensor.WithBacking(raw)),
		}}
		for range rows {
			s.StepType = append(s.StepType, Mid)
			s.NextStepType = append(s.NextStepType, Mid)
			s.Reward = append(s.Reward, 1)
			s.Discount = append(s.Discount, 1)
		}
		if err := w.Add(s); err != nil {
			t.Error(err)
			return
		}
	}
}

// cowAddAll adds n steps to the rows of every writer, writer by writer
// within each step.
func cowAddAll(t testing.TB, b *Buffer, ws []*Writer, n int) {
	t.Helper()
	for range n {
		for _, w := range ws {
			cowAdd(t, b, w, 1)
		}
	}
}

// newCOWBuffer returns a buffer of two rows wrapped once, with items, and
// its writers: one of both rows, or with single set one per row (whose
// adds take the single-row path).
func newCOWBuffer(t testing.TB, single bool) (*Buffer, []*Writer, *Table) {
	b, err := New(Config{NumEnvs: 2, Capacity: 1024, Seed: 3, Backend: cpu.New(),
		Fields: []Field{{Name: "pix", Role: Observation, DType: Uint8, Shape: []int{cowStepBytes}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tb, err := b.NewTable(TableConfig{Name: "u", Selector: Uniform, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var ws []*Writer
	groups := [][]int{{0, 1}}
	if single {
		groups = [][]int{{0}, {1}}
	}
	for _, rows := range groups {
		w, err := b.NewWriter(rows...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		ws = append(ws, w)
	}
	cowAddAll(t, b, ws, 1500) // wrapped once
	for r := range 2 {
		for p := int64(600); p < 1500; p += 50 {
			if _, err := tb.Insert(Item{Row: r, Start: p, Len: 3, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b, ws, tb
}

// TestCheckpointCopyOnWriteWrap lets a writer wrap the ring twice in the
// middle of a copy-on-write save (after the first chunk of the pixel
// arena is written, before the second is read): the checkpoint must be
// exactly the buffer at the cut, its tables included, and the writer
// must have preserved the steps it overwrote.
func TestCheckpointCopyOnWriteWrap(t *testing.T) {
	for _, tc := range []struct {
		mode   SnapshotMode
		single bool
	}{{SnapshotAuto, false}, {SnapshotCopyOnWrite, false}, {SnapshotCopyOnWrite, true}} {
		mode := tc.mode
		b, ws, _ := newCOWBuffer(t, tc.single)
		want := stateString(t, b)
		var rep SaveReport
		ran := false
		cowTestHook = func(c int, off int64) {
			if c == b.cols[0].ar && off == ckptChunk { // the pixel arena
				cowAddAll(t, b, ws, 2100)
				ran = true
			}
		}
		var out bytes.Buffer
		err := b.Save(&out, SaveOptions{Snapshot: mode, Report: &rep})
		cowTestHook = nil
		if err != nil {
			t.Fatal(err)
		}
		if !ran {
			t.Fatal("the writer never ran during the save")
		}
		if c := b.Cursor(0); c != 3600 {
			t.Fatalf("cursor %d after the save, want 3600", c)
		}
		// Every slot of both rows was overwritten during the save: the
		// slots of the pixel arena's second chunk were preserved (its
		// first 4 MiB chunk was streamed, and so was the record arena of
		// the built-in columns, which streams first).
		wantPres := int64(2*1024*cowStepBytes - ckptChunk)
		if rep.Preserved != wantPres || rep.Copied {
			t.Fatalf("%v, single-row writers %v: preserved %d bytes (copied %v), want %d", mode, tc.single, rep.Preserved, rep.Copied, wantPres)
		}
		lb, err := Load(bytes.NewReader(out.Bytes()), LoadOptions{Backend: cpu.New()})
		if err != nil {
			t.Fatal(err)
		}
		if got := stateString(t, lb); got != want {
			t.Fatalf("%v, single-row writers %v: checkpoint is not the cut: %s", mode, tc.single, firstDiff(want, got))
		}
		_ = lb.Close()
		if b.ckpt.cow != nil {
			t.Fatal("copy-on-write state left installed")
		}
	}
}

// TestCheckpointCopyOnWriteBudget runs a writer concurrently with
// copy-on-write saves whose preserved bytes are bounded to one step: the
// writer must wait for the saver rather than exceed it, and every
// checkpoint must hold, in every stored slot, exactly the step the
// writer wrote there.
func TestCheckpointCopyOnWriteBudget(t *testing.T) {
	old := cowLimit
	cowLimit = 1
	defer func() { cowLimit = old }()
	for _, single := range []bool{false, true} {
		cowBudgetRun(t, single)
	}
}

func cowBudgetRun(t *testing.T, single bool) {
	b, ws, _ := newCOWBuffer(t, single)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				cowAddAll(t, b, ws, 1)
			}
		}
	}()
	for range 3 {
		var out bytes.Buffer
		if err := b.Save(&out, SaveOptions{Snapshot: SnapshotCopyOnWrite}); err != nil {
			t.Fatal(err)
		}
		lb, err := Load(&out, LoadOptions{Backend: cpu.New()})
		if err != nil {
			t.Fatal(err)
		}
		c0 := &lb.cols[0]
		a0 := lb.arenas[c0.ar].arena
		raw := make([]byte, a0.Size())
		if err := lb.be.Download(raw, a0, 0); err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for pos := lb.oldest(r); pos < lb.cursor[r]; pos++ {
				s := lb.slot(r, pos)*c0.stride + c0.off
				for j := range cowStepBytes {
					if raw[s+int64(j)] != cowVal(r, pos, j) {
						t.Fatalf("row %d step %d byte %d: %d, want %d (cursor %d)", r, pos, j, raw[s+int64(j)], cowVal(r, pos, j), lb.cursor[r])
					}
				}
			}
		}
		_ = lb.Close()
	}
	close(stop)
	wg.Wait()
}
