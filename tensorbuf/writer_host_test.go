package tensorbuf

import (
	"errors"
	"fmt"
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
// tables (items inserted as steps arrive, evicted as the ring wraps),
// over ring wrap-around, cuts, multi-row adds in between, rows given or
// left nil, fields by name or by position and sources of every
// alignment, with capacities of 1 and more; a strict writer must refuse
// the same adds with the same errors.
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
				b, err := New(Config{NumEnvs: 4, Capacity: tc.capacity, Fields: hostRowFields, Backend: cpu.New(), Seed: 3})
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
				w2, err := b.NewWriterOptions(WriterOptions{Strict: true}, 3)
				if err != nil {
					t.Fatal(err)
				}
				return []*Writer{w0, w1, w2}
			}
			fw, rw := writers(fast), writers(ref)
			rng := rand.New(rand.NewPCG(uint64(tc.capacity), 9))
			refused := 0
			for i := range tc.adds {
				w := rng.IntN(3)
				var rows []int
				switch {
				case w == 1:
					rows = []int{1}
				case w == 2:
					rows = []int{3}
				case rng.IntN(4) == 0:
					rows = []int{2, 0} // two rows: the backend's scatter in both
				default:
					rows = []int{rng.IntN(2) * 2}
				}
				s := randomHostStep(rng, rows, i%3 == 0)
				if w > 0 && rng.IntN(2) == 0 {
					s.Rows = nil // the writer's one row
				}
				if rng.IntN(2) == 0 {
					s.Fields = make([]*tensor.Dense, len(hostRowFields))
					for k, f := range hostRowFields {
						s.Fields[k] = s.Values[f.Name]
					}
					s.Values = nil
				}
				errF, errR := fw[w].Add(s), rw[w].Add(s)
				if fmt.Sprint(errF) != fmt.Sprint(errR) {
					t.Fatalf("add %d: fast buffer: %v, reference: %v", i, errF, errR)
				}
				if errF != nil {
					if w != 2 || !errors.Is(errF, ErrStepType) {
						t.Fatalf("add %d: %v", i, errF)
					}
					refused++
				}
				if i%5 == 0 { // an item of the step just written in each buffer
					r := rows[0]
					for _, b := range []*Buffer{fast, ref} {
						tb, err := b.Table("u")
						if err != nil {
							t.Fatal(err)
						}
						if _, err := tb.Insert(Item{Row: r, Start: b.Cursor(r) - 1, Len: 1, Priority: 1}); err != nil && errF == nil {
							t.Fatalf("add %d: insert: %v", i, err)
						}
					}
				}
				if i%17 == 0 || i == tc.adds-1 {
					if got, want := stateString(t, fast), stateString(t, ref); got != want {
						t.Fatalf("after add %d:\n%s\nwant (backend):\n%s", i, got, want)
					}
				}
			}
			if refused == 0 || refused == tc.adds {
				t.Fatalf("the strict writer refused %d of %d adds: the test exercises nothing", refused, tc.adds)
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
