//go:build trajring_cuda

package gpu

/*
#include <stdint.h>
#include <cuda.h>

static CUresult trajring_wait_event(CUstream s, uintptr_t e) { return cuStreamWaitEvent(s, (CUevent)e, 0); }
static CUresult trajring_event_query(uintptr_t e) { return cuEventQuery((CUevent)e); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// Event is a CUDA event (made with timing disabled) of a Backend. Its
// methods are safe for concurrent use.
type Event struct {
	b  *Backend
	ev cu.Event
}

var _ kernels.Streamer = (*Backend)(nil)

// Stream returns the CUstream handle of the backend's non-blocking
// stream, for consumers that order work on it directly. It is valid
// until Close.
func (b *Backend) Stream() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *(*uintptr)(unsafe.Pointer(&b.stream))
}

// NewEvent creates an event. Free it with Close.
func (b *Backend) NewEvent() (kernels.Event, error) {
	err := b.enter()
	if err != nil {
		return nil, err
	}
	defer b.exit()
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return nil, driverErr("cuEventCreate", err)
	}
	return &Event{b: b, ev: ev}, nil
}

// event checks that e is a live event of this backend.
func (b *Backend) event(e kernels.Event) (*Event, error) {
	ev, ok := e.(*Event)
	if !ok || ev == nil || ev.b != b || ev.ev == (cu.Event{}) {
		return nil, fmt.Errorf("%w: event %T of another backend, or closed", ErrArena, e)
	}
	return ev, nil
}

// Record records e on the backend's stream after all work issued so far
// (a sample, an export): a consumer stream that waits on e.Handle() reads
// their outputs only once they are written.
func (b *Backend) Record(e kernels.Event) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	ev, err := b.event(e)
	if err != nil {
		return err
	}
	return driverErr("cuEventRecord", ev.ev.Record(b.stream))
}

// WaitHandle makes every later piece of work on the backend's stream
// (the next SampleInto's gather, say) wait until the latest record of the
// CUevent h issued so far has run: a consumer records h on its own stream
// when it is done reading a batch, and the backend may then overwrite
// it. h 0 is no wait. Nothing waits on the host.
func (b *Backend) WaitHandle(h uintptr) error {
	if h == 0 {
		return nil
	}
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	if res := C.trajring_wait_event(*(*C.CUstream)(unsafe.Pointer(&b.stream)), C.uintptr_t(h)); res != C.CUDA_SUCCESS {
		return driverErr("cuStreamWaitEvent", cudaError(res))
	}
	return nil
}

// Handle returns the CUevent handle, for cuStreamWaitEvent on a
// consumer's stream.
func (e *Event) Handle() uintptr { return *(*uintptr)(unsafe.Pointer(&e.ev)) }

// Synchronize waits on the host until the work recorded before e has
// finished.
func (e *Event) Synchronize() error {
	err := e.b.enter()
	if err != nil {
		return err
	}
	defer e.b.exit()
	e.b.syncs.Add(1)
	return driverErr("cuEventSynchronize", e.ev.Synchronize())
}

// Done reports without waiting whether the work recorded before e has
// finished.
func (e *Event) Done() (bool, error) {
	err := e.b.enter()
	if err != nil {
		return false, err
	}
	defer e.b.exit()
	return eventDone(e.ev)
}

// Close destroys the event.
func (e *Event) Close() error {
	err := e.b.enter()
	if err != nil {
		return err
	}
	defer e.b.exit()
	if e.ev == (cu.Event{}) {
		return fmt.Errorf("%w: event closed twice", ErrArena)
	}
	return driverErr("cuEventDestroy", cu.DestroyEvent(&e.ev))
}

// eventDone reports whether the work before ev has finished. It calls
// cuEventQuery itself because cu's Event.Query boxes CUDA_ERROR_NOT_READY
// (600) into an error value, which allocates on every query of a pending
// event; the steady state of sampling must not allocate.
func eventDone(ev cu.Event) (bool, error) {
	switch res := C.trajring_event_query(C.uintptr_t(*(*uintptr)(unsafe.Pointer(&ev)))); res {
	case C.CUDA_SUCCESS:
		return true, nil
	case C.CUDA_ERROR_NOT_READY:
		return false, nil
	default:
		return false, driverErr("cuEventQuery", cudaError(res))
	}
}

// CheckEvent returns nil when e is a live event of this backend, and an
// error wrapping ErrArena otherwise (another backend's, closed, or not a
// gpu event), without a driver call. It is safe for concurrent use.
func (b *Backend) CheckEvent(e kernels.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.event(e)
	return err
}
