//go:build cgo

package capi

/*
#include <stdint.h>
#include "trajring_abi.h"

*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf"
)

// trj_result_free releases the caller's handle of a result. Its memory is
// handed back once every DLPack tensor taken from it is deleted too, and
// no sample into it is under way in another thread: free does not wait
// for one (a rate-limited table's sample may wait long), which then
// fails with TRJ_EHANDLE and hands the memory back itself.
//
//export trj_result_free
func trj_result_free(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error { return freeResult(uint64(h)) })
}

// freeResult is trj_result_free's body.
func freeResult(h uint64) error {
	obj, err := handles.remove(h, kindResult)
	if err != nil {
		return err
	}
	r := obj.(*result)
	r.mu.Lock()
	defer r.mu.Unlock()
	forgetExport(h)
	r.freed, r.handle = true, 0
	if r.wake != nil {
		// The calls waiting through h for a fill of r fail at once.
		close(r.wake)
		r.wake = nil
	}
	if r.live == 0 && !r.filling {
		r.retire()
	}
	return nil
}

// trj_result_info stores the result's kind, its number of tensors and
// its leading dimensions (n, and L for a sequence batch, else 0). Like
// trj_result_name it does not wait for a sample into the result under
// way in another thread: it tells what the last completed sample left.
// trj_result_describe and trj_result_tensor, which hand out data
// pointers, wait for a sample that may move the memory (see
// trj_result_tensor).
//
//export trj_result_info
func trj_result_info(h C.uint64_t, kindOut, count, n, l *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if kindOut == nil || count == nil || n == nil || l == nil {
			return errNullOut()
		}
		*kindOut, *count, *n, *l = C.int64_t(r.kind), C.int64_t(len(r.views)), C.int64_t(r.n), C.int64_t(r.l)
		return nil
	})
}

// trj_result_state stores at filling 1 while a sample into the result
// is under way (in another thread: it runs without the result's lock,
// a table sample's rate-limiter wait included), else 0, and at waiters
// the number of calls on the result waiting for that sample to end (a
// second sample into it, trj_result_copy, a tensor or description that
// must see the memory the sample leaves). It never waits, and what it
// reports may change as soon as it returns: it is a diagnostic, which
// the tests use to know that a sample has begun, or that a call waits
// for it, without sleeping. Safe for concurrent use.
//
//export trj_result_state
func trj_result_state(h C.uint64_t, filling, waiters *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if filling == nil || waiters == nil {
			return errNullOut()
		}
		*filling, *waiters = 0, C.int64_t(r.waiters)
		if r.filling {
			*filling = 1
		}
		return nil
	})
}

// trj_result_describe stores what trj_result_info stores (kind, the
// number of tensors, n and L) at info[0..4) and describes the first
// min(count, cap) tensors into descs, as trj_result_tensor does (and
// waits as it does for a sample under way that may move the memory): a
// new result's Python object is made from this one call instead of one
// per tensor.
//
//export trj_result_describe
func trj_result_describe(h C.uint64_t, info *C.int64_t, descs *C.trj_tensor_desc, cap C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if info == nil {
			return errNullOut()
		}
		if e := r.awaitMoved(uint64(h)); e != nil {
			return e
		}
		ds, e := hostSlice[C.trj_tensor_desc](unsafe.Pointer(descs), cap, "tensor descriptions")
		if e != nil {
			return e
		}
		for i := range min(len(ds), len(r.views)) {
			if e := r.describe(i, &ds[i]); e != nil {
				return e
			}
		}
		out := unsafe.Slice((*C.int64_t)(info), 4)
		out[0], out[1], out[2], out[3] = C.int64_t(r.kind), C.int64_t(len(r.views)), C.int64_t(r.n), C.int64_t(r.l)
		return nil
	})
}

// describe writes the description of tensor i (in range) to desc. The
// caller holds r.mu.
func (r *result) describe(i int, desc *C.trj_tensor_desc) error {
	v := &r.views[i]
	if len(v.shape) > C.TRJ_MAX_DIMS {
		return fmt.Errorf("%w: tensor %q has %d dimensions, more than %d", tensorbuf.ErrShape, v.name, len(v.shape), C.TRJ_MAX_DIMS)
	}
	*desc = C.trj_tensor_desc{data: C.uint64_t(v.addr), device: C.int32_t(v.device), dtype: C.int32_t(v.dtype), ndim: C.int32_t(len(v.shape))}
	for j, s := range v.shape {
		desc.shape[j] = C.int64_t(s)
	}
	return nil
}

// trj_result_name writes the name of tensor i of the result into out.
//
//export trj_result_name
func trj_result_name(h C.uint64_t, i C.int64_t, out *C.char, outcap C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if i < 0 || int(i) >= len(r.views) {
			return fmt.Errorf("%w: tensor %d of %d", tensorbuf.ErrInvalidArg, i, len(r.views))
		}
		name := r.views[i].name
		if out == nil || int64(outcap) < int64(len(name))+1 {
			return fmt.Errorf("%w: name of %d bytes does not fit %d", tensorbuf.ErrInvalidArg, len(name)+1, outcap)
		}
		writeMsg(name, out, outcap)
		return nil
	})
}

// trj_result_tensor describes tensor i of the result. The data pointer
// stays valid until the caller frees the result's handle or samples into
// the result again while no DLPack tensor of it lives (such a sample may
// move the memory; one that begins with a live tensor refills the same
// memory in place); through DLPack, the memory stays valid while any
// tensor taken from it lives. While a sample into the result that may
// move its memory is under way in another thread, the call waits for it
// to end (without holding up the result's other calls) and describes
// what it left; during an in-place sample it does not wait, and the
// memory it describes is being written by that sample.
//
//export trj_result_tensor
func trj_result_tensor(h C.uint64_t, i C.int64_t, desc *C.trj_tensor_desc, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if desc == nil {
			return errNullOut()
		}
		if e := r.awaitMoved(uint64(h)); e != nil {
			return e
		}
		if i < 0 || int(i) >= len(r.views) {
			return fmt.Errorf("%w: tensor %d of %d", tensorbuf.ErrInvalidArg, i, len(r.views))
		}
		return r.describe(int(i), desc)
	})
}

// trj_result_copy copies tensor i of the result, read through Go (a host
// copy of device memory), into dst of dstcap bytes: what trajring sees,
// for callers that check writes made through a view. It waits for a
// sample into the result under way in another thread to end, and copies
// what that sample left.
//
//export trj_result_copy
func trj_result_copy(h C.uint64_t, i C.int64_t, dst unsafe.Pointer, dstcap C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		r, e := lockResult(uint64(h))
		if e != nil {
			return e
		}
		defer r.mu.Unlock()
		if e := r.awaitIdle(uint64(h)); e != nil {
			return e
		}
		if i < 0 || int(i) >= len(r.views) {
			return fmt.Errorf("%w: tensor %d of %d", tensorbuf.ErrInvalidArg, i, len(r.views))
		}
		v := r.views[i]
		n := viewBytes(v)
		if dst == nil || int64(dstcap) < n {
			return fmt.Errorf("%w: %d bytes do not fit a destination of %d", tensorbuf.ErrInvalidArg, n, dstcap)
		}
		if n == 0 {
			return nil
		}
		if v.device != deviceHost {
			return fmt.Errorf("%w: tensor %q is in device memory; take it through DLPack", tensorbuf.ErrDeviceTensor, v.name)
		}
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(v.data), n))
		return nil
	})
}

func viewBytes(v view) int64 {
	n := int64(1)
	for _, s := range v.shape {
		n *= s
	}
	switch v.dtype {
	case dtFloat64, dtInt64:
		return n * 8
	case dtFloat32, dtInt32:
		return n * 4
	}
	return n
}
