package tensorbuf_test

import (
	"context"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestDroppedBufferFreesRings drops buffers of 2 MiB rings (mmap'ed, so
// invisible to the garbage collector) with writers, tables and items,
// without Close: their rings must be given back once they are unreachable.
// A closed buffer's rings are freed once, by Close.
func TestDroppedBufferFreesRings(t *testing.T) {
	// The buffers' own backend counts their bytes, so that other tests'
	// garbage, collected meanwhile, cannot move the figures.
	be := &mappedBackend{Backend: cpu.New()}
	live := be.live.Load
	base := live()
	held := make([]*tensorbuf.Buffer, 20) // reachable until the first check
	func() {
		for i := range held {
			b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 4, Capacity: 1 << 14, Backend: be,
				Fields: []tensorbuf.Field{{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{8}}}})
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			step := &tensorbuf.Step{
				StepType: make([]tensorbuf.StepType, 4), NextStepType: []tensorbuf.StepType{1, 1, 1, 1},
				Reward: make([]float32, 4), Discount: []float32{1, 1, 1, 1},
				Values: map[string]*tensor.Dense{"obs": denseOf(tensorbuf.Float32, []int{4, 8}, make([]float64, 32))},
			}
			if err := w.Add(step); err != nil {
				t.Fatal(err)
			}
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.InsertContext(context.Background(), tensorbuf.Item{Row: 0, Start: 0, Len: 1}); err != nil {
				t.Fatal(err)
			}
			held[i] = b
		}
	}()
	if live := live(); live-base < 20<<20 {
		t.Fatalf("20 buffers of 2 MiB hold %d bytes: the test does not measure what it means to", live-base)
	}
	clear(held)
	if got := collect(base, live); got > base {
		t.Fatalf("dropped buffers still hold %d bytes after GC", got-base)
	}

	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 1 << 16, Fields: testFields, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Freed twice, its arena would be subtracted twice.
	if got := collect(base, live); got != base {
		t.Fatalf("a closed and dropped buffer: live bytes %d, want %d (freed twice or never)", got, base)
	}
}

func TestMemoryBytesAfterClose(t *testing.T) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 4, Fields: testFields})
	if err != nil {
		t.Fatal(err)
	}
	n := b.MemoryBytes()
	_ = b.Close()
	if b.MemoryBytes() != n {
		t.Fatal("MemoryBytes changed after Close")
	}
}
