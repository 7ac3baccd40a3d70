//go:build cgo

package capi

/*
#include <stdint.h>
#include <stdlib.h>
#include "trajring_abi.h"
#include "pydlpack.h"

void *trj_dl_alloc(int32_t versioned, int32_t ndim, int64_t **shape);
void trj_dl_set_ctx(void *p, int32_t versioned, void *group, uint64_t data);
void *trj_dl_group_new(uint64_t id);
int trj_dl_group_acquire(void *g);
int64_t trj_dl_live(void);
int64_t trj_dl_fast_count(void);
void trj_export_poison(void);
*/
import "C"

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf"
)

// consumerStreams is what a backend whose work runs on a stream offers
// DLPack consumers on other streams (the gpu backend).
type consumerStreams interface {
	HandOff(stream uintptr) error
	AfterConsumer(stream uintptr) error
}

// handOff makes a consumer's stream wait for the result's work (see
// trj_result_dlpack) and remembers the stream until the memory is reused.
func (r *result) handOff(v view, stream int64) error {
	if v.device == deviceHost || stream == -1 {
		if stream != -1 {
			return fmt.Errorf("%w: stream %d for host memory (DLPack: none)", tensorbuf.ErrInvalidArg, stream)
		}
		return nil
	}
	cs, ok := r.buf.b.Backend().(consumerStreams)
	if !ok {
		return fmt.Errorf("%w: backend %s cannot order a consumer's stream", tensorbuf.ErrBackend, r.buf.b.Backend().Name())
	}
	if stream <= 0 {
		return fmt.Errorf("%w: CUDA stream %d (DLPack: 1, 2 or a stream handle; -1 for none)", tensorbuf.ErrInvalidArg, stream)
	}
	if err := cs.HandOff(uintptr(stream)); err != nil {
		return fmt.Errorf("%w: %w", tensorbuf.ErrBackend, err)
	}
	if !slices.Contains(r.consumers, uintptr(stream)) {
		r.consumers = append(r.consumers, uintptr(stream))
	}
	return nil
}

// afterConsumers makes the backend's later work (the next sample into
// this memory) wait for what the consumers queued on their streams.
func (r *result) afterConsumers() {
	if len(r.consumers) == 0 {
		return
	}
	if cs, ok := r.buf.b.Backend().(consumerStreams); ok {
		for _, s := range r.consumers {
			_ = cs.AfterConsumer(s) // a lost device fails the next sample anyway
		}
	}
	r.consumers = r.consumers[:0]
}

// dlViews holds the view groups of results held by DLPack consumers, by
// id: a group (dlpack.c) counts the tensors of one result alive together,
// and its deleters call trjViewDrop once, for the last of them. A result
// counts each live group in live.
var dlViews = struct {
	sync.Mutex
	next uint64
	m    map[uint64]dlGroup
}{m: make(map[uint64]dlGroup)}

type dlGroup struct {
	r *result
	g unsafe.Pointer // the C group, freed by trjViewDrop
	h uint64         // the handle whose tensors made it (its pydlpack.c entry's key)
}

// viewGroup returns a group for one more tensor of r, taken through
// handle h: r's current group while a tensor of it lives, else a new one,
// which it publishes for trj_result_dlpack_py (pydlpack.c). The caller
// holds r.mu.
func (r *result) viewGroup(h uint64) (unsafe.Pointer, error) {
	if r.group != nil && C.trj_dl_group_acquire(r.group) != 0 {
		return r.group, nil
	}
	dlViews.Lock()
	dlViews.next++
	id := dlViews.next
	g := C.trj_dl_group_new(C.uint64_t(id))
	if g != nil {
		dlViews.m[id] = dlGroup{r: r, g: g, h: h}
	}
	dlViews.Unlock()
	if g == nil {
		return nil, fmt.Errorf("%w: out of C memory for a DLPack tensor", tensorbuf.ErrBackend)
	}
	r.group = g
	r.live++
	r.publish(h, g)
	return g, nil
}

// publish hands pydlpack.c the host views of r for tensors of group g
// taken through handle h: while g lives they cannot move. A view the fast
// path cannot serve (device memory) ends the published ones. The caller
// holds r.mu.
func (r *result) publish(h uint64, g unsafe.Pointer) {
	var e C.trj_export // no Go pointers: C copies it
	e.handle, e.group = C.uint64_t(h), g
	for i, v := range r.views {
		if i == C.TRJ_EXPORT_MAX_VIEWS || v.device != deviceHost || len(v.shape) > C.TRJ_MAX_DIMS {
			break
		}
		ev := &e.views[i]
		ev.data, ev.dtype, ev.ndim = C.uint64_t(v.addr), dlDType(v.dtype), C.int32_t(len(v.shape))
		for j, d := range v.shape {
			ev.shape[j] = C.int64_t(d)
		}
		e.n = C.int32_t(i + 1)
	}
	if e.n > 0 { // a device result (cuda build) has nothing to publish
		C.trj_export_publish(&e)
	}
}

// trj_result_dlpack returns, at out, a new DLPack managed tensor viewing
// tensor i of the result (versioned: a DLManagedTensorVersioned of DLPack
// 1.1, else a legacy DLManagedTensor). For device memory, stream is the
// consumer's CUDA stream (DLPack's stream protocol: 1 legacy default, 2
// per-thread default, -1 no synchronisation): it is made to wait for the
// sample's work, and the memory is not reused before the work the
// consumer queues on it by the time the last tensor is deleted has run.
// Host memory takes stream -1 only. The result's memory stays valid
// until the tensor's deleter runs, whatever happens to the handle. While
// a sample into the result is under way in another thread, the call
// waits for it to end (without holding up the result's other calls) and
// views what it left when the sample may move the memory (none of the
// result's tensors lived when it began) or the result is in device
// memory (its consumer's stream is then ordered after the sample's
// work, which is not queued before the sample ends). A host tensor taken
// during an in-place sample (one that began with a live tensor) does not
// wait: it views the memory that sample is writing, partly written
// until it ends, as every live tensor of the result does (the Python
// package's fast path, capi/pydlpack.c, serves such tensors without a
// call into Go). Bool
// tensors are exported as uint8 and the strides are always filled, so
// that every consumer DLPack has (NumPy 1.24, PyTorch 1.13 included)
// reads them.
//
//export trj_result_dlpack
func trj_result_dlpack(h C.uint64_t, i C.int64_t, versioned C.int32_t, stream C.int64_t, out *unsafe.Pointer, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		// A handle freed by another thread since the lookup fails here:
		// no tensor, and no entry published for a dead handle.
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if out == nil {
			return errNullOut()
		}
		if r.filling && (!r.inPlace || r.buf.device() != deviceHost) {
			// A sample under way in another thread may move the memory
			// (it began with no tensor alive), or has not yet queued the
			// device work a consumer's stream must wait for: wait for
			// the views it leaves.
			if e := r.awaitIdle(uint64(h)); e != nil {
				return e
			}
		}
		if i < 0 || int(i) >= len(r.views) {
			return fmt.Errorf("%w: tensor %d of %d", tensorbuf.ErrInvalidArg, i, len(r.views))
		}
		v := r.views[i]
		if err := r.handOff(v, int64(stream)); err != nil {
			return err
		}
		ndim := len(v.shape)
		var shp *C.int64_t
		p := C.trj_dl_alloc(C.int32_t(min(versioned, 1)), C.int32_t(ndim), &shp)
		if p == nil {
			return fmt.Errorf("%w: out of C memory for a DLPack tensor", tensorbuf.ErrBackend)
		}
		shape := unsafe.Slice((*int64)(unsafe.Pointer(shp)), 2*max(ndim, 1))
		stride := int64(1)
		for j := ndim - 1; j >= 0; j-- {
			shape[j] = v.shape[j]
			shape[ndim+j] = stride
			stride *= max(v.shape[j], 1)
		}
		g, e := r.viewGroup(uint64(h))
		if e != nil {
			C.free(p)
			return e
		}
		t := C.trj_dl_tensor{
			device:  C.trj_dl_device{device_type: C.int32_t(v.device), device_id: 0},
			ndim:    C.int32_t(ndim),
			dtype:   dlDType(v.dtype),
			shape:   (*C.int64_t)(unsafe.Pointer(&shape[0])),
			strides: (*C.int64_t)(unsafe.Pointer(&shape[ndim])),
		}
		if ndim == 0 {
			t.shape, t.strides = nil, nil
		}
		if versioned != 0 {
			m := (*C.trj_dl_managed_versioned)(p)
			m.major, m.minor = 1, 1
			m.dl_tensor = t
		} else {
			(*C.trj_dl_managed)(p).dl_tensor = t
		}
		C.trj_dl_set_ctx(p, C.int32_t(min(versioned, 1)), g, C.uint64_t(v.addr))
		*out = p
		return nil
	})
}

func dlDType(code int32) C.trj_dl_dtype {
	switch code {
	case dtFloat32:
		return C.trj_dl_dtype{code: 2, bits: 32, lanes: 1}
	case dtFloat64:
		return C.trj_dl_dtype{code: 2, bits: 64, lanes: 1}
	case dtInt32:
		return C.trj_dl_dtype{code: 0, bits: 32, lanes: 1}
	case dtInt64:
		return C.trj_dl_dtype{code: 0, bits: 64, lanes: 1}
	}
	return C.trj_dl_dtype{code: 1, bits: 8, lanes: 1}
}

// trjViewDrop is called by the DLPack deleters (dlpack.c) when a consumer
// drops the last tensor of a view group: the last group of a released
// result hands its memory back. It never fails; an unknown id is ignored.
// It never waits for a sample into the result under way in another
// thread (see fill), only for the result's lock, which no call holds
// across a wait.
//
//export trjViewDrop
func trjViewDrop(id C.uint64_t) {
	defer func() { _ = recover() }()
	dropGroup(uint64(id))
}

// dropGroup is trjViewDrop's body.
func dropGroup(id uint64) {
	dlViews.Lock()
	vg, ok := dlViews.m[id]
	delete(dlViews.m, id)
	dlViews.Unlock()
	if !ok {
		return
	}
	r := vg.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group == vg.g {
		r.group = nil
	}
	C.trj_export_forget(C.uint64_t(vg.h), vg.g) // before the group's memory goes
	C.free(vg.g)
	r.live--
	if r.live == 0 && r.freed && !r.filling {
		r.retire() // else the fill under way does (see fill)
	}
}

// trj_live_counts stores the numbers of live result handles and live
// DLPack tensors, for leak tests.
//
//export trj_live_counts
func trj_live_counts(results, tensors *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if results == nil || tensors == nil {
			return setOut(results, 0)
		}
		*results, *tensors = C.int64_t(handles.count(kindResult)), C.trj_dl_live()
		return nil
	})
}

// trj_dl_fast_tensors stores the number of DLPack tensors made so far by
// trj_result_dlpack_py (pydlpack.c) without a call into Go, for tests.
//
//export trj_dl_fast_tensors
func trj_dl_fast_tensors(out *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if out == nil {
			return setOut(out, 0)
		}
		*out = C.trj_dl_fast_count()
		return nil
	})
}

// forgetExport removes handle h's pydlpack.c entry: tensors of a freed
// handle take the general path, which refuses them.
func forgetExport(h uint64) { C.trj_export_forget(C.uint64_t(h), nil) }

// poisonExports empties pydlpack.c's registry and stops it publishing:
// after a panic every tensor takes the general path, which refuses.
func poisonExports() { C.trj_export_poison() }
