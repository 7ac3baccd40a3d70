package bench

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Layout is the per-step content of a scenario's buffer. Its methods only
// read it: safe for concurrent use.
type Layout struct {
	// Name identifies the layout in tables ("pixels", "lowdim").
	Name   string
	Fields []tensorbuf.Field
}

// builtinStepBytes is what the built-in columns (step_type,
// next_step_type, reward, discount) add to every stored step.
const builtinStepBytes = 16

// Pixels is the layout of Flashbax's and TorchRL's published benchmarks:
// a uint8 (32,32,3) observation and one float32 action; with the built-in
// columns that is 3,092 bytes per stored step.
func Pixels() Layout {
	return Layout{Name: "pixels", Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{32, 32, 3}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Float32, Shape: []int{1}},
	}}
}

// LowDim is a low-dimensional control layout (MuJoCo-like): a 17 float32
// observation and a 6 float32 action; 108 bytes per stored step.
func LowDim() Layout {
	return Layout{Name: "lowdim", Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{17}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Float32, Shape: []int{6}},
	}}
}

// StepBytes returns the bytes of one stored step, built-in columns
// included.
func (l Layout) StepBytes() int64 {
	s := int64(builtinStepBytes)
	for _, f := range l.Fields {
		s += int64(f.StepBytes())
	}
	return s
}

// ColumnBytes returns the bytes per step of every column in the buffer's
// order: the user fields, then step_type, next_step_type, reward and
// discount.
func (l Layout) ColumnBytes() []int64 {
	out := make([]int64, 0, len(l.Fields)+4)
	for _, f := range l.Fields {
		out = append(out, int64(f.StepBytes()))
	}
	return append(out, 4, 4, 4, 4)
}

// EpisodeLen is the length of every episode in the filled buffers,
// boundary step included: step t of row r has phase (t + 7r) % EpisodeLen;
// phase 0 is First, phase EpisodeLen-1 the boundary step (Last).
const EpisodeLen = 100

// stepTypeAt returns the step type and next step type of step t of row r
// in the filled buffers.
func stepTypeAt(r int, t int64) (st, next tensorbuf.StepType) {
	kind := func(t int64) tensorbuf.StepType {
		switch (t + 7*int64(r)) % EpisodeLen {
		case 0:
			return tensorbuf.First
		case EpisodeLen - 1:
			return tensorbuf.Last
		}
		return tensorbuf.Mid
	}
	return kind(t), kind(t + 1)
}

// stepper builds batched steps of a layout for a set of rows, reusing
// its memory.
type stepper struct {
	step  tensorbuf.Step
	rows  []int
	phase []int64 // each row's episode phase at time next (see EpisodeLen)
	next  int64
}

func newStepper(l Layout, rows []int) *stepper {
	n := len(rows)
	s := &stepper{rows: rows, phase: make([]int64, n), next: -1}
	s.step = tensorbuf.Step{
		Rows:         rows,
		StepType:     make([]tensorbuf.StepType, n),
		NextStepType: make([]tensorbuf.StepType, n),
		Reward:       make([]float32, n),
		Discount:     make([]float32, n),
		Fields:       make([]*tensor.Dense, len(l.Fields)),
	}
	for fi, f := range l.Fields {
		shape := append([]int{n}, f.Shape...)
		d := tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(shape...))
		raw := d.Header.Raw
		for i := range raw {
			raw[i] = byte(i*31 + fi*7 + 1)
		}
		s.step.Fields[fi] = d
	}
	return s
}

// at fills the step types of the step written at time t of each row
// (all rows of one writer advance together in the filled buffers), as
// stepTypeAt gives them; calls for consecutive times advance each row's
// phase instead of dividing.
func (s *stepper) at(t int64) *tensorbuf.Step {
	if t != s.next {
		for i, r := range s.rows {
			s.phase[i] = (t + 7*int64(r)) % EpisodeLen
		}
	}
	s.next = t + 1
	for i, p := range s.phase {
		st, next := tensorbuf.Mid, tensorbuf.Mid
		switch p {
		case 0:
			st = tensorbuf.First
		case EpisodeLen - 2:
			next = tensorbuf.Last
		case EpisodeLen - 1:
			st, next = tensorbuf.Last, tensorbuf.First
		}
		s.step.StepType[i], s.step.NextStepType[i] = st, next
		s.step.Reward[i], s.step.Discount[i] = 1, 1
		if next == tensorbuf.Last {
			s.step.Discount[i] = 0
		}
		if p++; p == EpisodeLen {
			p = 0
		}
		s.phase[i] = p
	}
	return &s.step
}

// Filled (safe for concurrent use: each call builds its own buffer)
// returns a buffer of the layout with numEnvs rows of capacity
// steps, every row full, with episodes of EpisodeLen steps. The caller
// closes it.
func Filled(l Layout, numEnvs, capacity int, be tensorbuf.Backend) (*tensorbuf.Buffer, error) {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: numEnvs, Capacity: capacity, Fields: l.Fields, Backend: be, Seed: 1})
	if err != nil {
		return nil, fmt.Errorf("bench: buffer of %d x %d %s steps: %w", numEnvs, capacity, l.Name, err)
	}
	w, err := b.NewWriter()
	if err != nil {
		b.Close()
		return nil, err
	}
	defer w.Close()
	st := newStepper(l, w.Rows())
	for t := range int64(capacity) {
		if err := w.Add(st.at(t)); err != nil {
			b.Close()
			return nil, fmt.Errorf("bench: filling: %w", err)
		}
	}
	return b, nil
}

// transitionBytes returns the bytes of one sampled transition: every user
// field, the observation fields again (next observation), reward,
// discount and is_done.
func transitionBytes(l Layout) int64 {
	s := int64(4 + 4 + 1)
	for _, f := range l.Fields {
		s += int64(f.StepBytes())
		if f.Role == tensorbuf.Observation {
			s += int64(f.StepBytes())
		}
	}
	return s
}
