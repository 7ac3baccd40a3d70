package driver

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// checkSpec validates a list of fields as an environment or policy spec:
// non-empty unique names, valid dtypes, positive dimensions, and bounds of
// length 0, 1 or the number of elements.
func checkSpec(fields []tensorbuf.Field) error {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if f.Name == "" {
			return fmt.Errorf("%w: field with an empty name", ErrSpec)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate field %q", ErrSpec, f.Name)
		}
		seen[f.Name] = true
		if f.DType.Size() == 0 {
			return fmt.Errorf("%w: field %q: invalid dtype %v", ErrSpec, f.Name, f.DType)
		}
		for _, d := range f.Shape {
			if d <= 0 {
				return fmt.Errorf("%w: field %q: shape %v has a non-positive dimension", ErrSpec, f.Name, f.Shape)
			}
		}
		n := f.Elems()
		if l := len(f.Min); l > 1 && l != n {
			return fmt.Errorf("%w: field %q: %d Min bounds for %d elements", ErrSpec, f.Name, l, n)
		}
		if l := len(f.Max); l > 1 && l != n {
			return fmt.Errorf("%w: field %q: %d Max bounds for %d elements", ErrSpec, f.Name, l, n)
		}
	}
	return nil
}

// NewTensors allocates one zeroed host tensor of shape [batch, ...shape] per
// field. It returns an error wrapping ErrSpec for an invalid spec or a
// non-positive batch. It is safe for concurrent use.
func NewTensors(fields []tensorbuf.Field, batch int) (map[string]*tensor.Dense, error) {
	if batch <= 0 {
		return nil, fmt.Errorf("%w: batch size %d", ErrSpec, batch)
	}
	if err := checkSpec(fields); err != nil {
		return nil, err
	}
	m := make(map[string]*tensor.Dense, len(fields))
	for _, f := range fields {
		m[f.Name] = newTensor(f, batch)
	}
	return m, nil
}

func newTensor(f tensorbuf.Field, batch int) *tensor.Dense {
	shape := append([]int{batch}, f.Shape...)
	return tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(shape...))
}

// NewTimeStep allocates a zeroed TimeStep of batch rows for an observation
// spec. It returns an error wrapping ErrSpec for an invalid spec or batch.
// It is safe for concurrent use.
func NewTimeStep(obsSpec []tensorbuf.Field, batch int) (*TimeStep, error) {
	obs, err := NewTensors(obsSpec, batch)
	if err != nil {
		return nil, err
	}
	return &TimeStep{
		StepType:    make([]tensorbuf.StepType, batch),
		Reward:      make([]float32, batch),
		Discount:    make([]float32, batch),
		Observation: obs,
	}, nil
}

// CheckTensors reports whether m holds, for every field, a host tensor of
// the field's dtype and shape [batch, ...field shape]. Extra entries are
// allowed. The error wraps ErrSpec and names the field. It does not
// allocate on success and is safe for concurrent use.
func CheckTensors(fields []tensorbuf.Field, batch int, m map[string]*tensor.Dense) error {
	for i := range fields {
		f := &fields[i]
		d, ok := m[f.Name]
		if !ok || d == nil {
			return fmt.Errorf("%w: missing tensor %q", ErrSpec, f.Name)
		}
		if d.Dtype() != f.DType.Tensor() {
			return fmt.Errorf("%w: tensor %q has dtype %v, want %v", ErrSpec, f.Name, d.Dtype(), f.DType)
		}
		s := d.Shape()
		ok = len(s) == 1+len(f.Shape) && s[0] == batch
		for j := 0; ok && j < len(f.Shape); j++ {
			ok = s[j+1] == f.Shape[j]
		}
		if !ok {
			return fmt.Errorf("%w: %s", ErrSpec, tensorbuf.ShapeMismatch(*f, batch, s))
		}
		if len(d.Raw) != batch*f.StepBytes() {
			return fmt.Errorf("%w: tensor %q is not a contiguous host tensor", ErrSpec, f.Name)
		}
	}
	return nil
}

// bound returns element i's bound from a bounds list of length 0 (none:
// def), 1 (shared) or n.
func bound(b []float64, i int, def float64) float64 {
	switch len(b) {
	case 0:
		return def
	case 1:
		return b[0]
	}
	return b[i]
}

// Bounds returns the lower and upper bound of element i of f (per-element
// Min/Max, or the shared single value), and ±Inf where f has none. It is
// safe for concurrent use.
func Bounds(f tensorbuf.Field, i int) (lo, hi float64) {
	return bound(f.Min, i, math.Inf(-1)), bound(f.Max, i, math.Inf(1))
}
