package tensorbuf

import (
	"fmt"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// ErrForeignTensor reports a device tensor given to Writer.Add that the
// buffer's backend cannot read in place: memory of another backend
// (another gpu.Backend, even on the same device, or a cpu-backed buffer),
// memory allocated outside trajring, or a freed arena. It wraps
// ErrDeviceTensor (and so ErrInvalidArg). Allocate a producer's step
// tensors from the buffer's backend instead (Backend().Alloc and
// Tensor), or copy them to the host.
var ErrForeignTensor = fmt.Errorf("%w: not memory of the buffer's backend", ErrDeviceTensor)

var _ DeviceScatterer = (*cpu.Backend)(nil)

// deviceSource checks the device tensor d given for field f of an add of
// n rows: its dtype, shape and contiguity, and that the buffer's backend
// reads it in place (DeviceScatterer). It allocates only on error.
func (w *Writer) deviceSource(d *tensor.Dense, f Field, n int) error {
	ds, ok := w.b.be.(DeviceScatterer)
	if !ok {
		return fmt.Errorf("%w: field %q (the %s backend reads no device sources)", ErrDeviceTensor, f.Name, w.b.be.Name())
	}
	if d.Dtype() != f.DType.Tensor() {
		return fmt.Errorf("%w: field %q is %v, got %v", ErrDType, f.Name, f.DType, d.Dtype())
	}
	if err := checkShape(f, n, d.Shape()); err != nil {
		return err
	}
	if d.RequiresIterator() {
		return fmt.Errorf("%w: field %q: tensor is a non-contiguous view", ErrShape, f.Name)
	}
	if err := ds.CheckSource(d, int64(n)*int64(f.StepBytes())); err != nil {
		return fmt.Errorf("%w: field %q: %w", ErrForeignTensor, f.Name, err)
	}
	return nil
}
