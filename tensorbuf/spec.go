package tensorbuf

import (
	"fmt"

	"gorgonia.org/tensor"
)

// DType is the element type of a field. Like Role, StepType and Field, it
// is a plain value, safe to share between goroutines.
type DType int

// The supported element types.
const (
	Float32 DType = iota
	Float64
	Int32
	Int64
	Uint8
	Bool
)

var dtypeInfo = [...]struct {
	name string
	size int
	t    tensor.Dtype
}{
	Float32: {"float32", 4, tensor.Float32},
	Float64: {"float64", 8, tensor.Float64},
	Int32:   {"int32", 4, tensor.Int32},
	Int64:   {"int64", 8, tensor.Int64},
	Uint8:   {"uint8", 1, tensor.Uint8},
	Bool:    {"bool", 1, tensor.Bool},
}

func (d DType) valid() bool { return d >= 0 && int(d) < len(dtypeInfo) }

// Size returns the size of one element in bytes (0 for an invalid DType).
func (d DType) Size() int {
	if !d.valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// Tensor returns the gorgonia tensor dtype of d.
func (d DType) Tensor() tensor.Dtype {
	if !d.valid() {
		return tensor.Dtype{}
	}
	return dtypeInfo[d].t
}

// String returns the dtype's name, such as "float32".
func (d DType) String() string {
	if !d.valid() {
		return fmt.Sprintf("DType(%d)", int(d))
	}
	return dtypeInfo[d].name
}

// DTypeOf returns the DType of a gorgonia tensor dtype.
func DTypeOf(t tensor.Dtype) (DType, bool) {
	for i, info := range dtypeInfo {
		if info.t == t {
			return DType(i), true
		}
	}
	return 0, false
}

// Role says what a field holds in a trajectory.
type Role int

// The roles of a field.
const (
	Observation Role = iota
	Action
	PolicyInfo
)

// String returns the role's name, such as "observation".
func (r Role) String() string {
	switch r {
	case Observation:
		return "observation"
	case Action:
		return "action"
	case PolicyInfo:
		return "policy_info"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Field describes one named per-step tensor of a trajectory. Min and Max,
// when set, hold per-element bounds (one value, or one per element) used
// by environments' specs and random policies; the buffer ignores them.
type Field struct {
	Name  string
	Role  Role
	DType DType
	Shape []int
	Min   []float64
	Max   []float64
}

// Elems returns the number of elements in one step of the field.
func (f Field) Elems() int {
	n := 1
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

// StepBytes returns the size of one step of the field in bytes.
func (f Field) StepBytes() int { return f.Elems() * f.DType.Size() }

// StepType marks a trajectory step's place in its episode.
type StepType int32

// The step types of TF-Agents.
const (
	First StepType = 0
	Mid   StepType = 1
	Last  StepType = 2
)

// String returns F, M or L (TF-Agents' First, Mid, Last).
func (s StepType) String() string {
	switch s {
	case First:
		return "F"
	case Mid:
		return "M"
	case Last:
		return "L"
	}
	return fmt.Sprintf("StepType(%d)", int32(s))
}

// Names of the built-in columns every buffer has.
const (
	StepTypeName     = "step_type"
	NextStepTypeName = "next_step_type"
	RewardName       = "reward"
	DiscountName     = "discount"
	// MaskName names the mask of a batch: true on real steps, false on pad.
	MaskName = "mask"
)
