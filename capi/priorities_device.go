//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// deviceCopier is what a device backend offers for data another library
// holds in device memory (the gpu backend).
type deviceCopier interface {
	CopyIn(dst tensorbuf.Arena, off int64, src uintptr, n int64) error
	consumerStreams
}

// trj_table_update_priorities_device sets the priorities of n items from
// device memory without a copy to the host (tensorbuf's
// UpdatePrioritiesDevice, for a Prioritized table with DeviceSelection):
// keys is the address of n int64 keys (a sample's key tensor, or a
// consumer's copy of it) and prio of n float32 priorities (a learner's
// |TD| errors), both device memory of the buffer's context. stream is
// the consumer's CUDA stream that wrote them (as in the DLPack protocol:
// 1 legacy default, 2 per-thread, -1 none): the update is ordered after
// its work, and the stream's later work (which may reuse that memory)
// after the update's copies. Unknown keys are skipped, as
// UpdatePrioritiesDevice does.
//
//export trj_table_update_priorities_device
func trj_table_update_priorities_device(h C.uint64_t, keys, prio C.uint64_t, dtype C.int32_t, n, stream C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		be := to.buf.b.Backend()
		dc, ok := be.(deviceCopier)
		switch {
		case !ok:
			return fmt.Errorf("%w: the %s backend's tables take priorities from host memory", tensorbuf.ErrDeviceTensor, be.Name())
		case dtype != dtFloat32:
			return fmt.Errorf("%w: device priorities of dtype code %d (want float32)", tensorbuf.ErrDType, dtype)
		case n <= 0 || n > math.MaxInt32:
			return fmt.Errorf("%w: %d priorities", tensorbuf.ErrInvalidArg, n)
		case keys == 0 || prio == 0:
			return fmt.Errorf("%w: device address 0", tensorbuf.ErrInvalidArg)
		case stream == 0 || stream < -1:
			return fmt.Errorf("%w: CUDA stream %d (DLPack: 1, 2 or a stream handle; -1 for none)", tensorbuf.ErrInvalidArg, stream)
		}
		to.mu.Lock()
		defer to.mu.Unlock()
		keyBytes := int64(n) * 8
		if e := to.growScratch(keyBytes + int64(n)*4); e != nil {
			return e
		}
		if stream != -1 {
			if e := dc.AfterConsumer(uintptr(stream)); e != nil {
				return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
			}
		}
		if e := dc.CopyIn(to.scratch, 0, uintptr(keys), keyBytes); e != nil {
			return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
		}
		if e := dc.CopyIn(to.scratch, keyBytes, uintptr(prio), int64(n)*4); e != nil {
			return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
		}
		if stream != -1 {
			if e := dc.HandOff(uintptr(stream)); e != nil {
				return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
			}
		}
		kt, e := be.Tensor(to.scratch, 0, tensor.Uint64, int(n))
		if e != nil {
			return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
		}
		pt, e := be.Tensor(to.scratch, keyBytes, tensor.Float32, int(n))
		if e != nil {
			return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, e)
		}
		return to.t.UpdatePrioritiesDevice(kt, pt)
	})
}

// growScratch makes the table handle's device scratch at least size
// bytes. The caller holds to.mu. A scratch being replaced is freed
// (the driver orders a free after the work queued on it).
func (to *tableObj) growScratch(size int64) error {
	be := to.buf.b.Backend()
	if to.scratch != nil && to.scratch.Size() >= size {
		return nil
	}
	if err := to.freeScratchLocked(); err != nil {
		return err
	}
	a, err := be.Alloc(max(size, 4096))
	if err != nil {
		return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, err)
	}
	to.scratch = a
	return nil
}

func (to *tableObj) freeScratch() error {
	to.mu.Lock()
	defer to.mu.Unlock()
	return to.freeScratchLocked()
}

func (to *tableObj) freeScratchLocked() error {
	if to.scratch == nil {
		return nil
	}
	a := to.scratch
	to.scratch = nil
	return to.buf.b.Backend().Free(a)
}

// trj_table_max_priority stores the table's running maximum priority
// (the default priority of new items; tensorbuf Table.MaxPriority).
//
//export trj_table_max_priority
func trj_table_max_priority(h C.uint64_t, out *C.double, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		return setOut(out, C.double(to.t.MaxPriority()))
	})
}
