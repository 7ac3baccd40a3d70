package cpu_test

import (
	"errors"
	"math"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TestHugeArgumentsAreErrors: sizes whose products overflow int64 are
// refused with ErrBounds instead of wrapping past the bounds checks; a
// huge absolute start is a valid position and is read without overflow.
func TestHugeArgumentsAreErrors(t *testing.T) {
	be := cpu.New()
	ring, out := arena(t, be, 64), arena(t, be, 64)
	col := []kernels.Column{{Ring: ring, StepBytes: 4, Out: out}}
	for name, err := range map[string]error{
		"windows 3 x 0x5555555555555556": be.GatherWindows(col, make([]kernels.Window, 3), 0x5555555555555556, 16, nil, 0),
		"windows 4 x 2^62":               be.GatherWindows(col, make([]kernels.Window, 4), 1<<62, 16, nil, 0),
		"rows at OutOff MaxInt64-7":      be.GatherRows([]kernels.Column{{Ring: ring, StepBytes: 8, Out: out, OutOff: math.MaxInt64 - 7}}, []int64{0}),
		"n-step capacity 2^62":           be.NStepReward(ring, out, 0, []kernels.Window{{Len: 1}}, 1<<62, 0.9),
		"n-step outOff MaxInt64-3":       be.NStepReward(ring, out, math.MaxInt64-3, []kernels.Window{{Len: 1}}, 16, 0.9),
		"gather into its ring":           be.GatherRows([]kernels.Column{{Ring: ring, StepBytes: 4, Out: ring}}, []int64{0}),
		"windows into another ring":      be.GatherWindows([]kernels.Column{{Ring: ring, StepBytes: 4, Out: out}, {Ring: out, StepBytes: 4, Out: arena(t, be, 64)}}, []kernels.Window{{Len: 1}}, 1, 16, nil, 0),
		"tensor 2^32 x 2^32":             func() error { _, err := be.Tensor(out, 0, tensor.Float32, 1<<32, 1<<32); return err }(),
	} {
		if !errors.Is(err, cpu.ErrBounds) {
			t.Errorf("%s: %v, want ErrBounds", name, err)
		}
	}
	// A window at an absolute start near MaxInt64 is valid (slot Start % 16).
	if err := be.NStepReward(ring, out, 0, []kernels.Window{{Start: math.MaxInt64, Len: 2}}, 16, 0.9); err != nil {
		t.Fatal(err)
	}
	// A pad pattern need not be aligned.
	buf := make([]byte, 16)
	if err := be.GatherWindows([]kernels.Column{{Ring: ring, StepBytes: 4, Out: out, Pad: buf[1:5]}}, []kernels.Window{{Len: 1}}, 4, 16, nil, 0); err != nil {
		t.Fatal(err)
	}
}
