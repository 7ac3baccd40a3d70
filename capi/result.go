//go:build cgo

package capi

/*
#include <stdint.h>
#include <stdlib.h>
#include "trajring_abi.h"

*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// resultKind is what a result holds.
type resultKind int32

const (
	kindBatch            resultKind = 1 // a *tensorbuf.Batch (sequences)
	kindTransitions      resultKind = 2 // *tensorbuf.Transitions (direct, n-step, export)
	kindTableTransitions resultKind = 3 // *tensorbuf.TableTransitions
)

// view is one tensor of a result as the ABI hands it out.
type view struct {
	name  string
	addr  uintptr        // the first element (device or host)
	data  unsafe.Pointer // the same, for host memory (pinned), else nil
	dtype int32
	shape []int64
	src   *tensor.Dense // the tensor, whose data refresh pins (host)
	// device is deviceHost or deviceCUDA: the tensors of a device result
	// are device memory, its metadata slices (row, step, key, ...) host.
	device int32
}

// result is a sample or export handed out through the ABI. Its memory
// stays where it is while the caller holds its handle or any DLPack
// tensor of it (views > 0): until then it is pinned, and it is refilled
// only in place (same shape, same memory). Safe for concurrent use.
//
// mu guards every field and is never held across a wait: a sample into
// the result (fill) marks it filling and runs without mu, so that the
// calls which must not wait for a rate limiter (a DLPack deleter,
// trj_result_free, the descriptions) take mu at once while the sample
// waits. Another fill of the same result, a copy of its data, a tensor
// or description that could see its memory move and a device tensor
// (whose consumer's stream must follow the fill's work) wait for the
// fill to end (awaitIdle), releasing mu meanwhile; a wait through a
// handle freed meanwhile ends at once with ErrHandle.
type result struct {
	mu   sync.Mutex
	buf  *bufferObj
	kind resultKind
	bt   *tensorbuf.Batch
	tr   *tensorbuf.Transitions
	ttr  *tensorbuf.TableTransitions
	// from is the table the last fill sampled from, nil for a direct
	// sample of buf (or an export). With kind, buf and stack it decides
	// the result's set of tensors (a table's sample adds its keys,
	// probabilities and weights, on the host or, for a DeviceSelection
	// table, in backend memory), so a refill with live tensors must keep
	// it, as it keeps n, L and the stacking.
	from *tensorbuf.Table

	views     []view
	spare     []view         // the previous views' slices, reused by the next refresh
	live      int            // DLPack view groups not yet deleted (see dlViews)
	group     unsafe.Pointer // the view group new tensors join while it lives
	freed     bool           // the caller released its handle
	pinner    runtime.Pinner
	released  bool      // memory handed back: the result is dead
	exported  bool      // an export, never refilled nor pooled
	stack     string    // the frame stacking of the last fill (stackKey), "" for none
	consumers []uintptr // CUDA streams handed tensors since the last retire

	handle uint64 // the handle naming the result, 0 when none does (freed, pooled, being made)
	n, l   int    // the leading dimensions of the last fill (lead), read without touching the tensors
	// filling tells whether a fill (run without mu) is under way, and
	// fillDone, made by the first call waiting for it (most fills have
	// none: a channel a fill was 1% of a hot-loop sample), is closed when
	// it ends. inPlace tells whether that fill keeps the result's memory
	// (it began with live tensors): tensors taken during it then stay
	// valid, others wait for its end.
	filling  bool
	fillDone chan struct{}
	inPlace  bool
	// waiters counts the calls waiting in awaitIdle for the fill under
	// way to end (trj_result_state reports it); wake, when not nil, is
	// closed by freeResult so that they stop waiting for a handle that
	// no longer names r.
	waiters int
	wake    chan struct{}
}

// ABI dtype codes (TRJ_DT_*).
const (
	dtFloat32 = 0
	dtFloat64 = 1
	dtInt32   = 2
	dtInt64   = 3
	dtUint8   = 4
	dtBool    = 5
)

func abiDType(dt tensor.Dtype) (int32, error) {
	switch dt {
	case tensor.Float32:
		return dtFloat32, nil
	case tensor.Float64:
		return dtFloat64, nil
	case tensor.Int32:
		return dtInt32, nil
	case tensor.Int64, tensor.Uint64:
		return dtInt64, nil
	case tensor.Uint8, tensor.Bool:
		return dtUint8, nil
	}
	return 0, fmt.Errorf("%w: dtype %v has no ABI code", tensorbuf.ErrDType, dt)
}

// addDense appends a view of d named name (nil is skipped).
func (r *result) addDense(name string, d *tensor.Dense) error {
	if d == nil {
		return nil
	}
	code, err := abiDType(d.Dtype())
	if err != nil {
		return err
	}
	shape := r.nextShape()
	for _, s := range d.Shape() {
		shape = append(shape, int64(s))
	}
	v := view{name: name, dtype: code, shape: shape, device: int32(r.buf.device())}
	if d.DataSize() > 0 {
		v.addr = d.Uintptr()
		if r.buf.device() == deviceHost {
			// The tensor's Go slice, the object to pin: refresh takes
			// it (hostPointer allocates) only when the layout moved.
			v.src = d
		}
	}
	r.views = append(r.views, v)
	return nil
}

// addSlice appends a view of a host slice as a one-dimensional tensor.
func addSlice[T any](r *result, name string, s []T, code int32) {
	v := view{name: name, dtype: code, shape: append(r.nextShape(), int64(len(s))), device: deviceHost}
	if len(s) > 0 {
		v.data = unsafe.Pointer(&s[0])
		v.addr = uintptr(v.data)
	}
	r.views = append(r.views, v)
}

// nextShape returns an empty shape slice for the view about to be
// appended, reusing the one a previous refresh left in that place.
func (r *result) nextShape() []int64 {
	if n := len(r.views); n < cap(r.views) {
		return r.views[:n+1][n].shape[:0]
	}
	return nil
}

// refresh rebuilds the views from the result's tensors after a fill and
// pins their memory. With live DLPack tensors the layout must not have
// moved (callers keep the shape; see fill). A refill that leaves the
// layout as it was (the hot loop's sample into a result) keeps the views
// and pins it has and allocates nothing; one that moves it (no live
// tensors) unpins the old memory, whose pointers the caller must not use
// after the refill, and pins the new.
func (r *result) refresh() error {
	old := r.views
	r.views = r.spare[:0]
	var err error
	add := func(name string, d *tensor.Dense) {
		if err == nil {
			err = r.addDense(name, d)
		}
	}
	switch r.kind {
	case kindBatch:
		bt := r.bt
		for _, f := range r.buf.fields {
			add(f.Name, bt.Fields[f.Name])
		}
		add(tensorbuf.StepTypeName, bt.StepType)
		add(tensorbuf.NextStepTypeName, bt.NextStepType)
		add(tensorbuf.RewardName, bt.Reward)
		add(tensorbuf.DiscountName, bt.Discount)
		add(tensorbuf.MaskName, bt.Mask)
		if len(bt.Valid) > 0 { // stacked samples: false where frames were lost
			addSlice(r, "valid", bt.Valid, dtUint8)
		}
		if bt.KeyTensor != nil {
			add("key", bt.KeyTensor)
			add("probability", bt.ProbabilityTensor)
			add("weight", bt.WeightTensor)
		} else if bt.Keys != nil {
			addSlice(r, "key", bt.Keys, dtInt64)
			addSlice(r, "probability", bt.Probabilities, dtFloat64)
			addSlice(r, "weight", bt.Weights, dtFloat64)
		}
	case kindTransitions, kindTableTransitions:
		tr := r.tr
		if r.kind == kindTableTransitions {
			tr = &r.ttr.Transitions
		}
		for _, f := range r.buf.fields {
			switch f.Role {
			case tensorbuf.Observation:
				add(f.Name, tr.Observation[f.Name])
			case tensorbuf.Action:
				add(f.Name, tr.Action[f.Name])
			default:
				add(f.Name, tr.PolicyInfo[f.Name])
			}
		}
		for _, f := range r.buf.fields {
			if f.Role == tensorbuf.Observation {
				add("next_"+f.Name, tr.NextObservation[f.Name])
			}
		}
		add(tensorbuf.RewardName, tr.Reward)
		add(tensorbuf.DiscountName, tr.Discount)
		add(tensorbuf.IsDoneName, tr.IsDone)
		if r.kind == kindTableTransitions && r.ttr.KeyTensor != nil {
			t := r.ttr
			add("key", t.KeyTensor)
			add("probability", t.ProbabilityTensor)
			add("weight", t.WeightTensor)
			add("valid", t.ValidTensor)
		} else {
			addSlice(r, "row", tr.Rows, dtInt64)
			addSlice(r, "step", tr.Steps, dtInt64)
			if r.kind == kindTableTransitions {
				t := r.ttr
				addSlice(r, "key", t.Keys, dtInt64)
				addSlice(r, "probability", t.Probabilities, dtFloat64)
				addSlice(r, "weight", t.Weights, dtFloat64)
				addSlice(r, "valid", t.Valid, dtUint8)
			}
		}
	}
	if err != nil {
		r.spare, r.views = r.views, old
		return err
	}
	r.n, r.l = r.lead()
	if len(old) > 0 && sameLayout(old, r.views) {
		// Unchanged: old's memory is pinned already (pinning it again
		// would grow the pinner by a reference per view and call).
		r.spare, r.views = r.views, old
		return nil
	}
	if r.live > 0 {
		// fill refuses every change of shape while tensors are alive;
		// reaching here means a tensorbuf result moved its memory anyway.
		panic(fmt.Sprintf("capi: a result's memory moved under %d live tensors", r.live))
	}
	r.spare = old
	r.pinner.Unpin()
	for i := range r.views {
		v := &r.views[i]
		if v.src != nil {
			v.data = hostPointer(v.src)
		}
		if v.data != nil {
			r.pinner.Pin(v.data)
		}
	}
	return nil
}

// hostPointer returns the first element of a host tensor's Go slice.
func hostPointer(d *tensor.Dense) unsafe.Pointer {
	return reflect.ValueOf(d.Data()).UnsafePointer()
}

func sameLayout(a, b []view) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].addr != b[i].addr || a[i].dtype != b[i].dtype || len(a[i].shape) != len(b[i].shape) {
			return false
		}
		for j := range a[i].shape {
			if a[i].shape[j] != b[i].shape[j] {
				return false
			}
		}
	}
	return true
}

// lead returns the result's leading dimensions (n, and L for a batch),
// which a refill with live tensors must keep, read from its tensors:
// refresh keeps them in r.n and r.l, which every other call reads, since
// a fill under way writes the tensors without holding r.mu.
func (r *result) lead() (n, l int) {
	switch r.kind {
	case kindBatch:
		return r.bt.Len()
	case kindTransitions:
		if r.tr.Reward != nil {
			return r.tr.Reward.Shape()[0], 0
		}
	case kindTableTransitions:
		if r.ttr.Reward != nil {
			return r.ttr.Reward.Shape()[0], 0
		}
	}
	return 0, 0
}

// release hands the result's memory back (tensorbuf Release) and unpins
// it. The caller guarantees no handle and no live tensor remain.
func (r *result) release() {
	if r.released {
		return
	}
	r.released = true
	r.pinner.Unpin()
	r.views = nil
	switch r.kind {
	case kindBatch:
		_ = r.bt.Release()
	case kindTransitions:
		_ = r.tr.Release()
	case kindTableTransitions:
		_ = r.ttr.Release()
	}
}

// retire is called once neither a handle nor a live tensor refers to r:
// r goes back to its buffer's pool, or is released when the pool is full
// or the buffer closed. A pooled result keeps its views and their pins:
// the next sample into it most often leaves its layout as it was, and
// refresh then keeps both (unpinning and pinning again every view cost
// each new result about a microsecond); one that moves it repins.
func (r *result) retire() {
	r.afterConsumers()
	bo := r.buf
	bo.mu.Lock()
	if bo.pool != nil && len(bo.pool[r.kind]) < poolSize && r.reusable() {
		r.freed = false
		bo.pool[r.kind] = append(bo.pool[r.kind], r)
		bo.mu.Unlock()
		return
	}
	bo.mu.Unlock()
	r.release()
}

// reusable reports whether a sample may refill r: exports are not.
func (r *result) reusable() bool { return !r.exported }

// takeResult returns an idle result of kind k from bo's pool, or a new one.
func (bo *bufferObj) takeResult(k resultKind) *result {
	bo.mu.Lock()
	if rs := bo.pool[k]; len(rs) > 0 {
		r := rs[len(rs)-1]
		bo.pool[k] = rs[:len(rs)-1]
		bo.mu.Unlock()
		return r
	}
	bo.mu.Unlock()
	r := &result{buf: bo, kind: k}
	switch k {
	case kindBatch:
		r.bt = new(tensorbuf.Batch)
	case kindTransitions:
		r.tr = new(tensorbuf.Transitions)
	case kindTableTransitions:
		r.ttr = new(tensorbuf.TableTransitions)
	}
	return r
}

const (
	deviceHost = 1
	deviceCUDA = 2
)

func deviceOf(b *tensorbuf.Buffer) int {
	if b.Backend().Name() == "gpu" {
		return deviceCUDA
	}
	return deviceHost
}

func (bo *bufferObj) device() int { return deviceOf(bo.b) }

func (k resultKind) String() string {
	switch k {
	case kindBatch:
		return "a sequence batch"
	case kindTransitions:
		return "transitions"
	case kindTableTransitions:
		return "table transitions"
	}
	return "nothing"
}
