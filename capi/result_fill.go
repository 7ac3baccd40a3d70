//go:build cgo

package capi

/*
#include <stdint.h>
#include "trajring_abi.h"

*/
import "C"

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

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
	r.filling, r.inPlace = true, inPlace
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.filling, r.inPlace = false, false
		if r.fillDone != nil {
			close(r.fillDone)
			r.fillDone = nil
		}
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
		if !r.filling {
			return nil
		}
		if r.fillDone == nil {
			r.fillDone = make(chan struct{})
		}
		done := r.fillDone
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
	if r.filling && !r.inPlace {
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
