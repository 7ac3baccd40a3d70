//go:build trajring_cuda

package gpu

import (
	"errors"
	"testing"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TestHugeArgumentsAreErrors: sizes whose products overflow int64 are
// refused before any launch instead of wrapping past the bounds checks
// (one such call used to write 2^59 pad steps from a 64-byte arena).
func TestHugeArgumentsAreErrors(t *testing.T) {
	b := newBackend(t)
	ring, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	before := b.Launches()
	for name, err := range map[string]error{
		"windows 1 x 2^59 of 16 bytes": b.GatherWindows([]kernels.Column{{Ring: ring, StepBytes: 16, Out: out}}, []kernels.Window{{}}, 1<<59, 1, nil, 0),
		"windows 4 x 2^62":             b.GatherWindows([]kernels.Column{{Ring: ring, StepBytes: 4, Out: out}}, make([]kernels.Window, 4), 1<<62, 16, nil, 0),
		"tensor 2^32 x 2^32":           func() error { _, err := b.Tensor(out, 0, tensor.Float32, 1<<32, 1<<32); return err }(),
	} {
		if !errors.Is(err, ErrBounds) {
			t.Errorf("%s: %v, want ErrBounds", name, err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := b.Launches() - before; n != 0 {
		t.Fatalf("%d kernels launched by refused calls", n)
	}
}
