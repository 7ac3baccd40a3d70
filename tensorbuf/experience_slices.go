package tensorbuf

import (
	"fmt"

	"gorgonia.org/tensor"
)

// ExperienceSlices is a batch of experiences as plain Go slices, for
// callers that hold them that way rather than as tensors (see
// Buffer.NewExperience). Each field maps a field name to a slice of the
// field's Go element type ([]float32 for Float32, []float64, []int32,
// []int64, []uint8 or []bool) holding the rows' values one after another:
// len(Reward) rows times the field's elements per step. It is a plain
// value.
type ExperienceSlices struct {
	// Rows are the env rows, in the order of the data; nil means all of
	// the writer's rows in the writer's order (see Experience.Rows).
	Rows []int
	// Observation, Action, PolicyInfo and NextObservation hold every user
	// field of their role (PolicyInfo may be nil when the buffer has
	// none), as Experience's maps do.
	Observation, Action, PolicyInfo, NextObservation map[string]any
	// Reward holds one reward per row; its length is the number of rows.
	Reward []float32
	// IsDone holds one value per row: Running, Terminated or Truncated.
	IsDone []uint8
}

// NewExperience builds the Experience of s for ExperienceWriter.Append:
// tensors shaped [n, ...field shape] (n = len(s.Reward)) that share s's
// slices, which must then not change until Append has returned; Reward
// and IsDone are s's own. It checks what the slices are and fails,
// building nothing, with ErrRows (no row, or Rows or IsDone of another
// length), ErrUnknownField (a name that is not a user field of that
// role), ErrMissingField (a field of the role not given), ErrDType (a
// value that is not a slice of the field's element type) or ErrShape (a
// slice of another length). Append still checks the values (finite
// rewards, IsDone, continuity). It is safe for concurrent use.
func (b *Buffer) NewExperience(s ExperienceSlices) (*Experience, error) {
	n := len(s.Reward)
	if n == 0 {
		return nil, fmt.Errorf("%w: an experience of no row", ErrRows)
	}
	if len(s.IsDone) != n || s.Rows != nil && len(s.Rows) != n {
		return nil, fmt.Errorf("%w: %d rewards but %d IsDone values and %d rows", ErrRows, n, len(s.IsDone), len(s.Rows))
	}
	e := &Experience{Rows: s.Rows, Reward: s.Reward, IsDone: s.IsDone}
	for _, part := range []struct {
		role Role
		what string
		from map[string]any
		to   *map[string]*tensor.Dense
	}{
		{Observation, "observation", s.Observation, &e.Observation},
		{Action, "action", s.Action, &e.Action},
		{PolicyInfo, "policy info", s.PolicyInfo, &e.PolicyInfo},
		{Observation, "next observation", s.NextObservation, &e.NextObservation},
	} {
		for name := range part.from {
			i, ok := b.byName[name]
			if !ok || b.cols[i].builtin || b.cols[i].Role != part.role {
				return nil, fmt.Errorf("%w: experience %s %q is not a %v field of the buffer", ErrUnknownField, part.what, name, part.role)
			}
		}
		m := make(map[string]*tensor.Dense)
		for i := range b.nUser {
			c := &b.cols[i]
			if c.Role != part.role {
				continue
			}
			v, ok := part.from[c.Name]
			if !ok {
				return nil, fmt.Errorf("%w: experience lacks %s %q", ErrMissingField, part.what, c.Name)
			}
			d, err := denseOfSlice(c.Field, n, v)
			if err != nil {
				return nil, fmt.Errorf("experience %s: %w", part.what, err)
			}
			m[c.Name] = d
		}
		*part.to = m
	}
	return e, nil
}

// denseOfSlice returns a tensor shaped [n, ...f.Shape] backed by v, a
// slice of f's element type holding n steps.
func denseOfSlice(f Field, n int, v any) (*tensor.Dense, error) {
	var l int
	switch f.DType {
	case Float32:
		l = lenOf[float32](v)
	case Float64:
		l = lenOf[float64](v)
	case Int32:
		l = lenOf[int32](v)
	case Int64:
		l = lenOf[int64](v)
	case Uint8:
		l = lenOf[uint8](v)
	case Bool:
		l = lenOf[bool](v)
	}
	if l < 0 {
		return nil, fmt.Errorf("%w: field %q is %v: want a []%v, got %T", ErrDType, f.Name, f.DType, f.DType, v)
	}
	if want := n * f.Elems(); l != want {
		return nil, fmt.Errorf("%w: field %q: %d values, want %d rows x %d", ErrShape, f.Name, l, n, f.Elems())
	}
	return tensor.New(tensor.WithShape(append([]int{n}, f.Shape...)...), tensor.WithBacking(v)), nil
}

// lenOf returns the length of v if it is a []T, else -1.
func lenOf[T any](v any) int {
	s, ok := v.([]T)
	if !ok {
		return -1
	}
	return len(s)
}
