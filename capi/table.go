//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf"
)

// tableObj is a table handed out through the ABI, with its buffer.
type tableObj struct {
	buf *bufferObj
	t   *tensorbuf.Table

	mu      sync.Mutex      // guards scratch
	scratch tensorbuf.Arena // device keys and priorities (priorities_device.go)
}

// tableSpec is the JSON form of a tensorbuf.TableConfig.
type tableSpec struct {
	Name            string       `json:"name"`
	Selector        string       `json:"selector"`
	Alpha           *float64     `json:"alpha"`
	Beta            float64      `json:"beta"`
	MaxSize         int          `json:"max_size"`
	MaxTimesSampled int          `json:"max_times_sampled"`
	Seed            uint64       `json:"seed"`
	DeviceSelection bool         `json:"device_selection"`
	RateLimiter     *limiterSpec `json:"rate_limiter"`
}

type limiterSpec struct {
	MinSize          int     `json:"min_size"`
	SamplesPerInsert float64 `json:"samples_per_insert"`
	ErrorBuffer      float64 `json:"error_buffer"`
	TimeoutSeconds   float64 `json:"timeout_seconds"`
}

var selectors = map[string]tensorbuf.Selector{}

func init() {
	for s := tensorbuf.Uniform; s <= tensorbuf.WithoutReplacement; s++ {
		selectors[s.String()] = s
	}
}

func (s *tableSpec) config() (tensorbuf.TableConfig, error) {
	sel, ok := selectors[s.Selector]
	if !ok {
		return tensorbuf.TableConfig{}, fmt.Errorf("%w: selector %q (want uniform, prioritized, fifo, lifo, min-heap, max-heap or without-replacement)", tensorbuf.ErrConfig, s.Selector)
	}
	cfg := tensorbuf.TableConfig{
		Name: s.Name, Selector: sel, Beta: s.Beta, MaxSize: s.MaxSize,
		MaxTimesSampled: s.MaxTimesSampled, Seed: s.Seed, DeviceSelection: s.DeviceSelection,
	}
	if s.Alpha != nil {
		cfg.PriorityExponent = *s.Alpha
		if *s.Alpha == 0 {
			cfg.PriorityExponent = tensorbuf.PriorityExponentZero
		}
	}
	if l := s.RateLimiter; l != nil {
		if math.IsNaN(l.TimeoutSeconds) || l.TimeoutSeconds < 0 || l.TimeoutSeconds > 1e9 {
			return cfg, fmt.Errorf("%w: rate limiter timeout %v s", tensorbuf.ErrConfig, l.TimeoutSeconds)
		}
		cfg.RateLimiter = &tensorbuf.RateLimiter{
			MinSize: l.MinSize, SamplesPerInsert: l.SamplesPerInsert, ErrorBuffer: l.ErrorBuffer,
			Timeout: time.Duration(l.TimeoutSeconds * float64(time.Second)),
		}
	}
	return cfg, nil
}

// trj_table_new creates a table of the buffer from a JSON config (see
// tableSpec) and stores its handle at out.
//
//export trj_table_new
func trj_table_new(buf C.uint64_t, cfgJSON *C.char, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := handleOut[*bufferObj](buf, kindBuffer, out)
		if e != nil {
			return e
		}
		s, e := goString(cfgJSON, "table config")
		if e != nil {
			return e
		}
		var ts tableSpec
		if e := decodeJSON(s, &ts); e != nil {
			return e
		}
		cfg, e := ts.config()
		if e != nil {
			return e
		}
		t, e := bo.b.NewTable(cfg)
		if e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindTable, &tableObj{buf: bo, t: t}))
		return nil
	})
}

// trj_table_get stores at out a new handle of the buffer's table name (a
// table created earlier or loaded with a checkpoint).
//
//export trj_table_get
func trj_table_get(buf C.uint64_t, name *C.char, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := handleOut[*bufferObj](buf, kindBuffer, out)
		if e != nil {
			return e
		}
		n, e := goString(name, "table name")
		if e != nil {
			return e
		}
		t, e := bo.b.Table(n)
		if e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindTable, &tableObj{buf: bo, t: t}))
		return nil
	})
}

// trj_table_free releases a table handle (the table stays in its buffer).
//
//export trj_table_free
func trj_table_free(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		obj, e := handles.remove(uint64(h), kindTable)
		if e != nil {
			return e
		}
		return obj.(*tableObj).freeScratch()
	})
}

// trj_table_size stores the number of items of the table at out.
//
//export trj_table_size
func trj_table_size(h C.uint64_t, out *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		return setOut(out, C.int64_t(to.t.Size()))
	})
}

// trj_table_insert inserts an item (Len steps of row from start, then pad
// pad steps; priority < 0 means the table's default) and stores its key.
// It waits for the rate limiter at most wait_ms milliseconds, then fails
// with TRJ_EWOULDBLOCK having inserted nothing, so that the caller can
// check for interrupts and call again.
//
//export trj_table_insert
func trj_table_insert(h C.uint64_t, row, start, length, pad C.int64_t, priority C.double, waitMS C.int64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := handleOut[*tableObj](h, kindTable, out)
		if e != nil {
			return e
		}
		ctx, cancel, e := waitContext(waitMS)
		if e != nil {
			return e
		}
		defer cancel()
		key, e := to.t.InsertContext(ctx, tensorbuf.Item{Row: int(row), Start: int64(start), Len: int(length), Pad: int(pad), Priority: float64(priority)})
		if e != nil {
			return waitErr(ctx, e)
		}
		*out = C.uint64_t(key)
		return nil
	})
}

// waitContext returns the context of one slice of a wait: waitMS
// milliseconds (at most a minute) from the moment the call first waits,
// or no limit when waitMS < 0.
func waitContext(waitMS C.int64_t) (context.Context, context.CancelFunc, error) {
	if waitMS < 0 {
		ctx, cancel := context.WithCancel(context.Background())
		return ctx, cancel, nil
	}
	if waitMS > 60000 {
		return nil, nil, fmt.Errorf("%w: a wait slice of %d ms (at most 60000)", tensorbuf.ErrInvalidArg, waitMS)
	}
	c := &sliceContext{slice: time.Duration(waitMS) * time.Millisecond}
	return c, c.stop, nil
}

// sliceContext is a wait slice that begins when a wait asks for its
// Done channel or Deadline, and is never done before: most samples and
// inserts never wait, and a call that need not wait goes through even
// with a slice of 0 ms (a non-blocking try, as Reverb's timeout 0). Its
// clock is read and its timer made only then (a timer made and stopped
// each call was a tenth of a one-item sample's time, the clock read at
// every call 4%). Safe for concurrent use.
type sliceContext struct {
	slice    time.Duration
	mu       sync.Mutex
	deadline time.Time       // zero until the slice begins
	inner    context.Context // nil until Done
	cancel   context.CancelFunc
}

// beginLocked starts the slice, once. The caller holds c.mu.
func (c *sliceContext) beginLocked() {
	if c.deadline.IsZero() {
		c.deadline = time.Now().Add(c.slice)
	}
}

func (c *sliceContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beginLocked()
	return c.deadline, true
}

func (c *sliceContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beginLocked()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(context.Background(), c.deadline)
	}
	return c.inner.Done()
}

func (c *sliceContext) Err() error {
	c.mu.Lock()
	inner, deadline := c.inner, c.deadline
	c.mu.Unlock()
	switch {
	case inner != nil:
		return inner.Err()
	case deadline.IsZero() || time.Now().Before(deadline):
		return nil
	}
	return context.DeadlineExceeded
}

func (c *sliceContext) Value(any) any { return nil }

// stop releases the timer, if Done made one.
func (c *sliceContext) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
}

// waitErr reports a wait that ran out of its slice as errWouldBlock.
func waitErr(ctx context.Context, err error) error {
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errWouldBlock, err)
	}
	return err
}

// trj_table_delete removes the items of the n keys (unknown keys are
// ignored, as tensorbuf.Table.Delete does).
//
//export trj_table_delete
func trj_table_delete(h C.uint64_t, keys *C.int64_t, n C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		ks, e := hostSlice[uint64](unsafe.Pointer(keys), n, "keys")
		if e != nil {
			return e
		}
		to.t.Delete(ks...)
		return nil
	})
}

// hostSlice views n elements at p as a Go slice for the call (nil for
// n == 0); p must not be NULL when n > 0.
func hostSlice[T any](p unsafe.Pointer, n C.int64_t, what string) ([]T, error) {
	var zero T
	switch {
	case n < 0 || int64(n) > math.MaxInt/int64(max(unsafe.Sizeof(zero), 1)):
		return nil, fmt.Errorf("%w: %d %s", tensorbuf.ErrInvalidArg, n, what)
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, fmt.Errorf("%w: NULL %s", tensorbuf.ErrInvalidArg, what)
	}
	return unsafe.Slice((*T)(p), int(n)), nil
}

// trj_table_update_priorities sets the priorities of n items: keys
// (int64) and priorities (dtype TRJ_DT_FLOAT64 or TRJ_DT_FLOAT32). It
// changes nothing unless every key and priority is valid.
//
//export trj_table_update_priorities
func trj_table_update_priorities(h C.uint64_t, keys *C.int64_t, prio unsafe.Pointer, dtype C.int32_t, n C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		ks, e := hostSlice[uint64](unsafe.Pointer(keys), n, "keys")
		if e != nil {
			return e
		}
		switch dtype {
		case dtFloat64:
			ps, e := hostSlice[float64](prio, n, "priorities")
			if e != nil {
				return e
			}
			return to.t.UpdatePriorities(ks, ps)
		case dtFloat32:
			ps, e := hostSlice[float32](prio, n, "priorities")
			if e != nil {
				return e
			}
			return to.t.UpdatePriorities32(ks, ps)
		}
		return fmt.Errorf("%w: priorities of dtype code %d (want float32 or float64)", tensorbuf.ErrDType, dtype)
	})
}

// trj_table_set_beta sets the importance-weight exponent of the table.
//
//export trj_table_set_beta
func trj_table_set_beta(h C.uint64_t, beta C.double, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		to, e := getAs[*tableObj](uint64(h), kindTable)
		if e != nil {
			return e
		}
		return to.t.SetBeta(float64(beta))
	})
}

// trj_table_sample samples n items as a sequence batch (tensorbuf
// Table.SampleInto) into the result into, or a new result when into is
// 0, and stores its handle at out. A rate-limited wait lasts at most
// wait_ms (then TRJ_EWOULDBLOCK, nothing sampled).
//
//export trj_table_sample
func trj_table_sample(h C.uint64_t, n C.int64_t, waitMS C.int64_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		return sampleTable(h, n, waitMS, "", into, out, kindBatch, func(ctx context.Context, t *tensorbuf.Table, r *result) error {
			return t.SampleInto(ctx, r.bt, int(n))
		})
	})
}

// trj_table_sample_transitions samples n items as n-step transitions
// (tensorbuf Table.SampleTransitionsInto; horizon n, discount gamma), as
// trj_table_sample does.
//
//export trj_table_sample_transitions
func trj_table_sample_transitions(h C.uint64_t, n, horizon C.int64_t, gamma C.double, waitMS C.int64_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		opt := tensorbuf.NStepOptions{Horizon: int(horizon), DiscountFactor: float64(gamma)}
		return sampleTable(h, n, waitMS, "", into, out, kindTableTransitions, func(ctx context.Context, t *tensorbuf.Table, r *result) error {
			return t.SampleTransitionsInto(ctx, r.ttr, int(n), opt)
		})
	})
}

// sampleTable is the body of the table sample exports: it checks the
// table and n, bounds the rate limiter's wait by waitMS, and fills a
// result of kind k with sample.
func sampleTable(h C.uint64_t, n, waitMS C.int64_t, stack string, into C.uint64_t, out *C.uint64_t, k resultKind,
	sample func(ctx context.Context, t *tensorbuf.Table, r *result) error) error {
	to, err := getAs[*tableObj](uint64(h), kindTable)
	if err != nil {
		return err
	}
	if err := sampleCount(n); err != nil {
		return err
	}
	ctx, cancel, err := waitContext(waitMS)
	if err != nil {
		return err
	}
	defer cancel()
	return fill(to.buf, to.t, uint64(into), k, int(n), 0, stack, func(r *result) error {
		return waitErr(ctx, sample(ctx, to.t, r))
	}, out)
}
