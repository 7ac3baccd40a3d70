//go:build trajring_cuda

package gpu

import (
	"errors"
	"fmt"

	"gorgonia.org/tensor"
)

// ErrDeviceMemory reports an attempt to read or write device memory from
// the host through a tensor (its engine is DeviceEngine).
var ErrDeviceMemory = errors.New("gpu: device memory is not host-accessible")

// DeviceEngine is the gorgonia.org/tensor engine of every tensor returned
// by Backend.Tensor. It reports its memory as not host-accessible
// (AllocAccessible is false, so tensor marks the tensor NativelyInaccessible)
// and is a NonStdEngine, so tensor's operations that check (arithmetic,
// Memset, Apply, iterators, copies with iterators, Slice...) return errors
// instead of dereferencing a device address; Clone, which allocates
// through the engine, panics with ErrDeviceMemory (a recoverable panic).
// Calls that still read memory without checking, and so must never be
// made on device tensors: Data (returns a slice over device memory), and
// Format with a value verb (fmt's %v, %s, Println) — print Shape and
// Dtype instead. It is a plain value, safe for concurrent use.
type DeviceEngine struct {
	keep any // see WithKeeper
}

// WithKeeper returns the engine carrying k, which then stays reachable
// for as long as any tensor with the engine (or a view of it: gorgonia
// copies a tensor's engine into its views) is. tensorbuf attaches the
// owner of a result's memory, so that the memory is freed only once
// neither the result nor any tensor over it is reachable.
func (e DeviceEngine) WithKeeper(k any) tensor.Engine {
	e.keep = k
	return e
}

// Keeper returns the value WithKeeper attached (nil if none).
func (e DeviceEngine) Keeper() any { return e.keep }

// AllocAccessible reports false: the memory is device memory.
func (DeviceEngine) AllocAccessible() bool { return false }

// Alloc refuses: device tensors only view arenas.
func (DeviceEngine) Alloc(size int64) (tensor.Memory, error) {
	return nil, fmt.Errorf("%w: tensor allocation of %d bytes (copy with Backend.Download)", ErrDeviceMemory, size)
}

// Free does nothing: arenas own the memory.
func (DeviceEngine) Free(tensor.Memory, int64) error { return nil }

// Memset refuses.
func (DeviceEngine) Memset(tensor.Memory, interface{}) error {
	return fmt.Errorf("%w: Memset", ErrDeviceMemory)
}

// Memclr does nothing (it cannot report an error).
func (DeviceEngine) Memclr(tensor.Memory) {}

// Memcpy refuses.
func (DeviceEngine) Memcpy(dst, src tensor.Memory) error {
	return fmt.Errorf("%w: Memcpy", ErrDeviceMemory)
}

// Accessible refuses: there is no host view of device memory.
func (DeviceEngine) Accessible(tensor.Memory) (tensor.Memory, error) {
	return nil, fmt.Errorf("%w: Accessible", ErrDeviceMemory)
}

// WorksWith reports true for every data order.
func (DeviceEngine) WorksWith(tensor.DataOrder) bool { return true }

// NonStdAlloc marks the engine as a tensor.NonStdEngine.
func (DeviceEngine) NonStdAlloc() {}

// IsDevice reports whether t views device memory (its engine is a
// DeviceEngine), so host code must not read it. Safe for concurrent use.
func IsDevice(t *tensor.Dense) bool {
	if t == nil {
		return false
	}
	_, ok := t.Engine().(DeviceEngine)
	return ok
}
