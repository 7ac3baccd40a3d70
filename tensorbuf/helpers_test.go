package tensorbuf_test

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// testFields covers every dtype and role.
var testFields = []tensorbuf.Field{
	{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}},
	{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{2, 2}},
	{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	{Name: "act2", Role: tensorbuf.Action, DType: tensorbuf.Int32, Shape: []int{2}},
	{Name: "logp", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Float64, Shape: []int{1}},
	{Name: "flag", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Bool},
}

// val is the value of element e of field f at step pos of a row: unique
// enough per (row, pos) to catch a step read from the wrong slot, and
// exact in every dtype.
func val(f, row int, pos int64, e int) float64 {
	v := (row*131 + int(pos)*17 + e*7 + f*3) % 251
	if testFields[f].DType == tensorbuf.Bool {
		return float64(v % 2)
	}
	return float64(v)
}

// rawStep is one stored step as the reference model keeps it.
type rawStep struct {
	st, next         tensorbuf.StepType
	reward, discount float32
}

// makeStep builds the Step writing step pos[i] of rows[i].
func makeStep(t testing.TB, rows []int, pos []int64, meta []rawStep) *tensorbuf.Step {
	t.Helper()
	s := &tensorbuf.Step{Rows: rows, Values: map[string]*tensor.Dense{}}
	for i := range rows {
		s.StepType = append(s.StepType, meta[i].st)
		s.NextStepType = append(s.NextStepType, meta[i].next)
		s.Reward = append(s.Reward, meta[i].reward)
		s.Discount = append(s.Discount, meta[i].discount)
	}
	for f, fd := range testFields {
		shape := append([]int{len(rows)}, fd.Shape...)
		n := fd.Elems()
		vals := make([]float64, 0, len(rows)*n)
		for i, r := range rows {
			for e := range n {
				vals = append(vals, val(f, r, pos[i], e))
			}
		}
		s.Values[fd.Name] = denseOf(fd.DType, shape, vals)
	}
	return s
}

func denseOf(dt tensorbuf.DType, shape []int, vals []float64) *tensor.Dense {
	var backing any
	switch dt {
	case tensorbuf.Float32:
		x := make([]float32, len(vals))
		for i, v := range vals {
			x[i] = float32(v)
		}
		backing = x
	case tensorbuf.Float64:
		backing = append([]float64(nil), vals...)
	case tensorbuf.Int32:
		x := make([]int32, len(vals))
		for i, v := range vals {
			x[i] = int32(v)
		}
		backing = x
	case tensorbuf.Int64:
		x := make([]int64, len(vals))
		for i, v := range vals {
			x[i] = int64(v)
		}
		backing = x
	case tensorbuf.Uint8:
		x := make([]uint8, len(vals))
		for i, v := range vals {
			x[i] = uint8(v)
		}
		backing = x
	case tensorbuf.Bool:
		x := make([]bool, len(vals))
		for i, v := range vals {
			x[i] = v != 0
		}
		backing = x
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

// floats returns a host tensor's elements as float64.
func floats(t testing.TB, d *tensor.Dense) []float64 {
	t.Helper()
	switch x := d.Data().(type) {
	case []float32:
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	case []float64:
		return append([]float64(nil), x...)
	case []int32:
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	case []int64:
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	case []uint8:
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	case []bool:
		out := make([]float64, len(x))
		for i, v := range x {
			if v {
				out[i] = 1
			}
		}
		return out
	case float32:
		return []float64{float64(x)}
	case uint8:
		return []float64{float64(x)}
	}
	t.Fatalf("unexpected tensor data %T", d.Data())
	return nil
}

func newBuffer(t testing.TB, envs, capacity int) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: testFields, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// model is the deliberately simple reference: every step ever added, per
// row, as a slice.
type model struct {
	capacity int64
	steps    [][]rawStep
}

func newModel(envs, capacity int) *model {
	return &model{capacity: int64(capacity), steps: make([][]rawStep, envs)}
}

func (m *model) cursor(r int) int64 { return int64(len(m.steps[r])) }
func (m *model) oldest(r int) int64 { return max(0, m.cursor(r)-m.capacity) }

// adder writes steps through a writer and records them in the model.
type adder struct {
	t  testing.TB
	m  *model
	w  *tensorbuf.Writer
	st []tensorbuf.StepType // next step type per row
}

func (a *adder) add(rows []int, meta []rawStep) {
	a.t.Helper()
	pos := make([]int64, len(rows))
	for i, r := range rows {
		pos[i] = a.m.cursor(r)
	}
	if err := a.w.Add(makeStep(a.t, rows, pos, meta)); err != nil {
		a.t.Fatalf("add rows %v: %v", rows, err)
	}
	for i, r := range rows {
		a.m.steps[r] = append(a.m.steps[r], meta[i])
	}
}

// checkWindow verifies that item b of a host batch holds the model's steps
// row/start for n real steps and pad after them, in every column.
func checkWindow(t testing.TB, m *model, hb *tensorbuf.Batch, b, row int, start int64, n int) {
	t.Helper()
	_, l := hb.Len()
	mask := floats(t, hb.Mask)
	st := floats(t, hb.StepType)
	next := floats(t, hb.NextStepType)
	rew := floats(t, hb.Reward)
	disc := floats(t, hb.Discount)
	for k := range l {
		j := b*l + k
		real := k < n
		what := fmt.Sprintf("item %d (row %d start %d len %d) step %d", b, row, start, n, k)
		if (mask[j] == 1) != real {
			t.Fatalf("%s: mask %v", what, mask[j])
		}
		want := rawStep{st: tensorbuf.Last, next: tensorbuf.First}
		if real {
			want = m.steps[row][start+int64(k)]
		}
		if st[j] != float64(want.st) || next[j] != float64(want.next) || rew[j] != float64(want.reward) || disc[j] != float64(want.discount) {
			t.Fatalf("%s: got (%v %v %v %v), want %+v", what, st[j], next[j], rew[j], disc[j], want)
		}
		for f, fd := range testFields {
			got := floats(t, hb.Fields[fd.Name])
			e := fd.Elems()
			for i := range e {
				w := 0.0
				if real {
					w = val(f, row, start+int64(k), i)
				}
				if got[j*e+i] != w {
					t.Fatalf("%s: field %s[%d] = %v, want %v", what, fd.Name, i, got[j*e+i], w)
				}
			}
		}
	}
}
