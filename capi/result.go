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
	// filling is closed when the fill under way (run without mu) ends;
	// nil when none is. inPlace tells whether that fill keeps the
	// result's memory (it began with live tensors): tensors taken during
	// it then stay valid, others wait for its end.
	filling chan struct{}
	inPlace bool
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

// fill samples into a result: into (a result handle of kind k, refilled
// in place) or a fresh or pooled result when into is 0; do fills it and
// returns an error that leaves it unchanged. from is the table sampled
// (nil for a direct sample of bo). With live tensors the sample must
// keep the result's set of tensors and their shapes, or it fails with
// ErrBusy before anything is drawn, leaving the result as it was: the
// same source (from: a direct sample of the buffer, or the same table,
// whose selection on the host or the backend decides whether the keys,
// probabilities and weights are host slices or backend tensors), the
// same stacking, and the result's leading dimensions: n (and l, a direct
// sequence sample's L, when l > 0); a table batch keeps its L by
// tensorbuf.Batch.FixedLen.
//
// do runs without the result's lock (see result and run), so that a
// sample waiting for a rate limiter holds up only the calls that must
// wait for its end: a second fill of the same result waits for the first
// (the calls on one result stay serialised), while a DLPack deleter or
// trj_result_free returns at once. A result freed during the fill is
// left to it: the fill hands the memory back once no tensor of it
// lives, and fails with ErrHandle (the sample itself was drawn).
func fill(bo *bufferObj, from *tensorbuf.Table, into uint64, k resultKind, n, l int, stack string, do func(r *result) error, out *C.uint64_t) error {
	if out == nil {
		return setOut(out, 0)
	}
	h, err := fillHandle(bo, from, into, k, n, l, stack, do)
	if err != nil {
		return err
	}
	*out = C.uint64_t(h)
	return nil
}

// fillHandle is fill's body: it returns the handle of the result filled
// (into, or a new one).
func fillHandle(bo *bufferObj, from *tensorbuf.Table, into uint64, k resultKind, n, l int, stack string, do func(r *result) error) (uint64, error) {
	if into == 0 {
		r := bo.takeResult(k)
		r.mu.Lock()
		defer r.mu.Unlock()
		// No handle names r yet: nothing but a stale handle's caller,
		// which lockResult refuses, reaches it during the fill.
		if r.kind == kindBatch {
			r.bt.FixedLen = 0
		}
		if err := r.run(from, stack, do, false); err != nil {
			r.retire()
			return 0, err
		}
		r.handle = handles.add(kindResult, r)
		return r.handle, nil
	}
	r, err := lockResult(into)
	if err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	if err := r.awaitIdle(into); err != nil {
		return 0, err
	}
	if r.kind != k {
		return 0, fmt.Errorf("%w: result %d holds %s, not %s", tensorbuf.ErrInvalidArg, into, r.kind, k)
	}
	if r.buf != bo {
		return 0, fmt.Errorf("%w: result %d belongs to another buffer", tensorbuf.ErrInvalidArg, into)
	}
	if !r.reusable() {
		return 0, fmt.Errorf("%w: result %d is an export, which is never refilled; sample into a new result", tensorbuf.ErrInvalidArg, into)
	}
	if r.live > 0 {
		if n != r.n || (l > 0 && l != r.l) {
			return 0, fmt.Errorf("%w: a sample of shape (%d, %d) into a result of shape (%d, %d) whose tensors are alive; drop them, or sample into a new result", ErrBusy, n, l, r.n, r.l)
		}
		if stack != r.stack {
			// Stacking changes the stacked fields' shapes and memory.
			return 0, fmt.Errorf("%w: a sample stacked as {%s} into a result stacked as {%s} whose tensors are alive; drop them, or sample into a new result", ErrBusy, stack, r.stack)
		}
		if from != r.from {
			// Another source changes the set of tensors (keys, weights).
			return 0, fmt.Errorf("%w: a sample %s into a result last filled %s whose tensors are alive; drop them, or sample into a new result", ErrBusy, source(from), source(r.from))
		}
		if r.kind == kindBatch {
			r.bt.FixedLen = r.l
		}
	} else if r.kind == kindBatch {
		r.bt.FixedLen = 0
	}
	err = r.run(from, stack, do, r.live > 0)
	if r.freed {
		// trj_result_free ran during the fill and left r to it.
		if r.live == 0 {
			r.retire()
		}
		if err == nil {
			err = fmt.Errorf("%w: result %d was freed while a sample into it was under way", ErrHandle, into)
		}
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	return into, nil
}

// run fills r with do, a sample from table from (nil: a direct sample),
// and refreshes its views; inPlace tells whether the fill keeps r's
// memory (it began with live tensors). The caller holds r.mu, no fill of
// r is under way and r is not released; run releases r.mu while do
// runs, marking r filling meanwhile, and returns with it held. A failed
// do leaves r unchanged.
func (r *result) run(from *tensorbuf.Table, stack string, do func(r *result) error, inPlace bool) error {
	if err := r.unlocked(do, inPlace); err != nil {
		return err
	}
	r.stack, r.from = stack, from
	return r.refresh()
}

// source describes the source of a sample (table from, nil for a direct
// sample) for errors.
func source(from *tensorbuf.Table) string {
	if from == nil {
		return "drawn directly from the buffer"
	}
	return fmt.Sprintf("from table %q", from.Name())
}

// unlocked runs do(r) with r marked filling and r.mu released, and
// takes r.mu back and ends the mark (waking awaitIdle) however do ends,
// a panic included.
func (r *result) unlocked(do func(r *result) error, inPlace bool) error {
	done := make(chan struct{})
	r.filling, r.inPlace = done, inPlace
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.filling, r.inPlace = nil, false
		close(done)
	}()
	return do(r)
}

// awaitIdle waits, releasing r.mu meanwhile, until no fill of r is under
// way, and fails with ErrHandle as soon as handle h no longer names r:
// freed before or during the wait (freeResult wakes the waiters), or
// pooled and handed out again, when the fill r then serves is another
// handle's, which a caller of h must not wait for. It checks h on every
// wake, before waiting again. The caller holds r.mu, as on return.
func (r *result) awaitIdle(h uint64) error {
	for {
		if err := r.owned(h); err != nil {
			return err
		}
		if r.filling == nil {
			return nil
		}
		done := r.filling
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake := r.wake
		r.waiters++
		r.mu.Unlock()
		select {
		case <-done:
		case <-wake:
		}
		r.mu.Lock()
		r.waiters--
	}
}

// awaitMoved is awaitIdle when a fill of r under way may move its
// memory (it began with no live DLPack tensor, see unlocked): the views
// of the last completed fill then point at memory the fill may hand
// back, and a call handing out pointers waits for the views it leaves.
// An in-place fill keeps the memory, and the call does not wait. The
// caller holds r.mu, as on return.
func (r *result) awaitMoved(h uint64) error {
	if r.filling != nil && !r.inPlace {
		return r.awaitIdle(h)
	}
	return nil
}

// owned fails with ErrHandle unless handle h names r. The caller holds
// r.mu.
func (r *result) owned(h uint64) error {
	if r.handle != h || r.freed {
		return fmt.Errorf("%w: result handle %d was freed", ErrHandle, h)
	}
	return nil
}

// lockResult returns the result of handle h with its lock held, failing
// with ErrHandle when h does not name a result, or no longer does once
// the lock is taken (freed by another thread since the lookup: results
// are pooled, so the object may be another handle's by then). It never
// waits for a fill under way.
func lockResult(h uint64) (*result, error) {
	r, err := getAs[*result](h, kindResult)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := r.owned(h); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	return r, nil
}

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
	if r.live == 0 && r.filling == nil {
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
		if r.filling != nil {
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
