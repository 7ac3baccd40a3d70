package tensorbuf

import (
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// hostRowFields have a field in its own arena (300 bytes), packed fields
// of every element size, a 4-byte uint8 field (the typed-store case) and
// an odd-sized one.
var hostRowFields = []Field{
	{Name: "pix", Role: Observation, DType: Uint8, Shape: []int{300}},
	{Name: "obs", Role: Observation, DType: Float32, Shape: []int{3}},
	{Name: "u4", Role: Observation, DType: Uint8, Shape: []int{4}},
	{Name: "flags", Role: Observation, DType: Bool, Shape: []int{3}},
	{Name: "act", Role: Action, DType: Int64},
	{Name: "q", Role: Action, DType: Float64, Shape: []int{2}},
}

// randomHostStep returns a step of the given rows with random values,
// step types (some contradicting the row's previous step: cuts),
// rewards and discounts. With odd set, the u4 field's tensor views its
// backing one byte past a 4-byte boundary.
func randomHostStep(rng *rand.Rand, rows []int, odd bool) *Step {
	n := len(rows)
	s := &Step{Rows: rows, Values: map[string]*tensor.Dense{}}
	types := []StepType{First, Mid, Last}
	for range n {
		s.StepType = append(s.StepType, types[rng.IntN(3)])
		s.NextStepType = append(s.NextStepType, types[rng.IntN(3)])
		s.Reward = append(s.Reward, float32(rng.IntN(100))-50)
		s.Discount = append(s.Discount, float32(rng.IntN(2)))
	}
	for _, f := range hostRowFields {
		shape := append([]int{n}, f.Shape...)
		d := tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(shape...))
		if f.Name == "u4" && odd {
			raw := make([]uint8, 1+n*4)
			d = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(raw[1:]))
		}
		raw := d.Header.Raw
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		if f.DType == Bool {
			for i := range raw {
				raw[i] &= 1
			}
		}
		s.Values[f.Name] = d
	}
	return s
}

// TestSingleRowAddsMatchBackend requires buffers that write single-row
// adds themselves (hostRows) to end byte for byte as buffers that hand
// every add to the cpu backend: arenas, metadata, cursors, Stats and
// tables, over ring wrap-around, cuts, multi-row adds in between and
// sources of every alignment, with capacities of 1 and more.
func TestSingleRowAddsMatchBackend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		adds     int
	}{
		{"capacity 1", 1, 40},
		{"capacity 5, wraps", 5, 200},
		{"capacity 64", 64, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(viaBackend bool) *Buffer {
				t.Helper()
				noHostRows = viaBackend
				defer func() { noHostRows = false }()
				b, err := New(Config{NumEnvs: 3, Capacity: tc.capacity, Fields: hostRowFields, Backend: cpu.New(), Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close() })
				if _, err := b.NewTable(TableConfig{Name: "u", Selector: Uniform, Seed: 1}); err != nil {
					t.Fatal(err)
				}
				return b
			}
			fast, ref := build(false), build(true)
			if fast.hostRows == nil || ref.hostRows != nil {
				t.Fatalf("hostRows: %v on the fast buffer, %v on the reference", fast.hostRows != nil, ref.hostRows != nil)
			}
			writers := func(b *Buffer) []*Writer {
				w0, err := b.NewWriter(0, 2)
				if err != nil {
					t.Fatal(err)
				}
				w1, err := b.NewWriter(1)
				if err != nil {
					t.Fatal(err)
				}
				return []*Writer{w0, w1}
			}
			fw, rw := writers(fast), writers(ref)
			rng := rand.New(rand.NewPCG(uint64(tc.capacity), 9))
			for i := range tc.adds {
				w := rng.IntN(2)
				var rows []int
				switch {
				case w == 1:
					rows = []int{1}
				case rng.IntN(4) == 0:
					rows = []int{2, 0} // two rows: the backend's scatter in both
				default:
					rows = []int{rng.IntN(2) * 2}
				}
				s := randomHostStep(rng, rows, i%3 == 0)
				if err := fw[w].Add(s); err != nil {
					t.Fatalf("add %d to the fast buffer: %v", i, err)
				}
				if err := rw[w].Add(s); err != nil {
					t.Fatalf("add %d to the reference: %v", i, err)
				}
				if i%17 == 0 || i == tc.adds-1 {
					if got, want := stateString(t, fast), stateString(t, ref); got != want {
						t.Fatalf("after add %d:\n%s\nwant (backend):\n%s", i, got, want)
					}
				}
			}
		})
	}
}

// TestSingleRowAddRefusedWritesNothing: a single-row add with a source of
// the wrong length is refused by stage before anything is written.
func TestSingleRowAddRefusedWritesNothing(t *testing.T) {
	b, err := New(Config{NumEnvs: 2, Capacity: 4, Fields: hostRowFields, Backend: cpu.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.hostRows == nil {
		t.Fatal("a cpu buffer has no single-row plan")
	}
	w, err := b.NewWriter(1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if err := w.Add(randomHostStep(rng, []int{1}, false)); err != nil {
		t.Fatal(err)
	}
	before := stateString(t, b)
	s := randomHostStep(rng, []int{1}, false)
	s.Values["pix"] = tensor.New(tensor.Of(tensor.Uint8), tensor.WithShape(1, 299))
	if err := w.Add(s); err == nil {
		t.Fatal("a 299-byte pix source was accepted")
	}
	if after := stateString(t, b); after != before {
		t.Fatalf("a refused add changed the buffer:\n%s\nbefore:\n%s", after, before)
	}
}
