//go:build trajring_cuda

package gpu

/*
#include <stdint.h>
#include <cuda.h>

static CUresult trajring_consumer_wait(uintptr_t s, uintptr_t e) { return cuStreamWaitEvent((CUstream)s, (CUevent)e, 0); }
static CUresult trajring_consumer_record(uintptr_t e, uintptr_t s) { return cuEventRecord((CUevent)e, (CUstream)s); }
*/
import "C"

import (
	"unsafe"

	"gorgonia.org/cu"
)

// HandOff makes a consumer's stream wait for all work issued so far on
// the backend's stream, without waiting on the host: the DLPack stream
// protocol's producer side (the consumer passes its stream to
// __dlpack__; 1 is the legacy default stream and 2 the per-thread one, as
// cuda.h defines CU_STREAM_LEGACY and CU_STREAM_PER_THREAD). stream 0 is
// refused, as DLPack says. Safe for concurrent use.
func (b *Backend) HandOff(stream uintptr) error {
	return b.crossStreams(stream, true)
}

// AfterConsumer makes all later work on the backend's stream wait for the
// work issued so far on a consumer's stream: called before memory a
// consumer was handed is reused, so that kernels it queued on that
// memory finish first, whenever its deleter ran. Safe for concurrent use.
func (b *Backend) AfterConsumer(stream uintptr) error {
	return b.crossStreams(stream, false)
}

// crossStreams records an event on one stream and makes the other wait
// on it: from the backend's stream to stream when toConsumer, else back.
func (b *Backend) crossStreams(stream uintptr, toConsumer bool) error {
	if stream == 0 {
		return driverErr("cuStreamWaitEvent", cudaError(C.CUDA_ERROR_INVALID_HANDLE))
	}
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return driverErr("cuEventCreate", err)
	}
	defer func() { _ = cu.DestroyEvent(&ev) }()
	h := C.uintptr_t(*(*uintptr)(unsafe.Pointer(&ev)))
	own := C.uintptr_t(*(*uintptr)(unsafe.Pointer(&b.stream)))
	from, to := own, C.uintptr_t(stream)
	if !toConsumer {
		from, to = to, from
	}
	if res := C.trajring_consumer_record(h, from); res != C.CUDA_SUCCESS {
		return driverErr("cuEventRecord", cudaError(res))
	}
	if res := C.trajring_consumer_wait(to, h); res != C.CUDA_SUCCESS {
		return driverErr("cuStreamWaitEvent", cudaError(res))
	}
	return nil
}
