package tensorbuf

import (
	"errors"
	"testing"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// stackSteps stacks one-step-per-row Steps of the same rows time-major,
// as AddSteps takes them.
func stackSteps(steps []*Step) *Step {
	out := &Step{Rows: steps[0].Rows, Values: map[string]*tensor.Dense{}}
	for _, s := range steps {
		out.StepType = append(out.StepType, s.StepType...)
		out.NextStepType = append(out.NextStepType, s.NextStepType...)
		out.Reward = append(out.Reward, s.Reward...)
		out.Discount = append(out.Discount, s.Discount...)
	}
	for _, fd := range ckptFields {
		shape := append([]int{len(steps) * len(out.Rows)}, fd.Shape...)
		var raw []byte
		for _, s := range steps {
			raw = append(raw, s.Values[fd.Name].Header.Raw...)
		}
		d := tensor.New(tensor.Of(fd.DType.Tensor()), tensor.WithShape(shape...))
		copy(d.Header.Raw, raw)
		out.Values[fd.Name] = d
	}
	return out
}

// TestAddStepsIsSuccessiveAdds requires AddSteps(k) to leave a buffer,
// with tables whose items it evicts, exactly as k Adds of the same steps
// leave an identical one (stateString: arenas, metadata, cursors, Stats,
// every table's structures): over ring wrap-around, a subset of rows in
// another order, k from 1 to the capacity, and cuts inside a call.
func TestAddStepsIsSuccessiveAdds(t *testing.T) {
	const envs, capacity = 3, 8
	a := newCkptBuffer(t, cpu.New(), envs, capacity, 20)
	b := newCkptBuffer(t, cpu.New(), envs, capacity, 20)
	if sa, sb := stateString(t, a), stateString(t, b); sa != sb {
		t.Fatal("the two fixtures differ before the test")
	}
	wa, err := a.NewWriter(2, 0)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.NewWriter(2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for call, k := range []int{1, 3, capacity, 2, 5, 7} {
		rows := []int{2, 0}
		var steps []*Step
		for j := range k {
			pos := []int64{a.Cursor(2) + int64(j), a.Cursor(0) + int64(j)}
			s := ckptStep(rows, pos)
			if call == 2 && j == 3 {
				s.StepType[1], s.NextStepType[1] = First, Mid // a cut inside the call
			}
			steps = append(steps, s)
		}
		if err := wa.AddSteps(stackSteps(steps), k); err != nil {
			t.Fatalf("call %d: AddSteps(%d): %v", call, k, err)
		}
		for _, s := range steps {
			if err := wb.Add(s); err != nil {
				t.Fatal(err)
			}
		}
		if sa, sb := stateString(t, a), stateString(t, b); sa != sb {
			t.Fatalf("call %d, k %d: AddSteps left\n%s\nk Adds left\n%s", call, k, sa, sb)
		}
	}
}

// TestAddStepsRefusals checks that a refused AddSteps writes nothing.
func TestAddStepsRefusals(t *testing.T) {
	const envs, capacity = 2, 8
	b := newCkptBuffer(t, cpu.New(), envs, capacity, 6)
	w, err := b.NewWriterOptions(WriterOptions{Strict: true}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	two := func() *Step {
		rows := []int{0, 1}
		s0 := ckptStep(rows, []int64{b.Cursor(0), b.Cursor(1)})
		s1 := ckptStep(rows, []int64{b.Cursor(0) + 1, b.Cursor(1) + 1})
		return stackSteps([]*Step{s0, s1})
	}
	before := stateString(t, b)
	for _, tc := range []struct {
		name string
		s    *Step
		k    int
		want error
	}{
		{"k 0", two(), 0, ErrInvalidArg},
		{"k past capacity", two(), capacity + 1, ErrInvalidArg},
		{"k not the steps given", two(), 3, ErrRows},
		{"step type inside the call", func() *Step {
			s := two()
			s.StepType[3] = First // row 1's second step does not follow its first
			if s.NextStepType[1] == First {
				s.StepType[3] = Mid
			}
			return s
		}(), 2, ErrStepType},
		{"non-finite reward", func() *Step { s := two(); s.Reward[2] = float32(inf()); return s }(), 2, ErrInvalidArg},
	} {
		if err := w.AddSteps(tc.s, tc.k); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if after := stateString(t, b); after != before {
			t.Fatalf("%s: a refused AddSteps changed the buffer", tc.name)
		}
	}
}

func inf() float64 { var z float64; return 1 / z }
