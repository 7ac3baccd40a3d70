//go:build cgo

package capi

/*
#include <stdint.h>
#include "trajring_abi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// observerWriter is what the item-writing observers have in common.
type observerWriter interface {
	Observe(t *driver.Trajectory) error
	Reset(writeCachedSteps bool) error
	Flush() error
	Close() error
}

// writerObj adds batched steps to a buffer: through a tensorbuf.Writer
// (w), or through an observer that also creates items (obs). A writer's
// calls are serialised by mu, so threads may share it.
type writerObj struct {
	mu     sync.Mutex
	buf    *bufferObj
	w      *tensorbuf.Writer
	obs    observerWriter
	rows   []int
	step   tensorbuf.Step
	traj   driver.Trajectory
	closed bool

	// views and fieldBuf are the tensors of the last add's field arrays,
	// reused by the next add that passes the same arrays (a collector's
	// loop does): making them anew was most of the ABI's part of a
	// one-row add.
	views    []arrayView
	fieldBuf []*tensor.Dense
}

// arrayView is a tensor viewing a caller's array for one call, with what
// the caller passed for it (address, bytes, dtype code, shape).
type arrayView struct {
	p      unsafe.Pointer
	nbytes int64
	code   int32
	dims   []int
	d      *tensor.Dense
}

// observerSpec is the JSON form of an observer's config: kind is
// "add_trajectory" (observer.AddTrajectory: tables with their own
// sequence lengths and strides), "sequence" (observer.TrajectorySequence)
// or "episode" (observer.AddEpisode).
type observerSpec struct {
	Kind                  string          `json:"kind"`
	Tables                []tableSequence `json:"tables"`
	SequenceLength        int             `json:"sequence_length"`
	Stride                int             `json:"stride"`
	MaxSequenceLength     int             `json:"max_sequence_length"`
	Priority              float64         `json:"priority"`
	PadEndOfEpisodes      bool            `json:"pad_end_of_episodes"`
	TileEndOfEpisodes     bool            `json:"tile_end_of_episodes"`
	BypassPartialEpisodes bool            `json:"bypass_partial_episodes"`
	Rows                  []int           `json:"rows"`
}

type tableSequence struct {
	Table          string `json:"table"`
	SequenceLength int    `json:"sequence_length"`
	Stride         int    `json:"stride"`
}

func (s *observerSpec) build(b *tensorbuf.Buffer) (observerWriter, error) {
	names := make([]string, len(s.Tables))
	for i, t := range s.Tables {
		names[i] = t.Table
	}
	switch s.Kind {
	case "add_trajectory":
		cfg := observer.AddTrajectoryConfig{Priority: s.Priority, PadEndOfEpisodes: s.PadEndOfEpisodes, TileEndOfEpisodes: s.TileEndOfEpisodes, Rows: s.Rows}
		for _, t := range s.Tables {
			cfg.Tables = append(cfg.Tables, observer.TableSequence{Table: t.Table, SequenceLength: t.SequenceLength, Stride: t.Stride})
		}
		return observer.NewAddTrajectory(b, cfg)
	case "sequence":
		return observer.NewTrajectorySequence(b, observer.SequenceConfig{
			Tables: names, SequenceLength: s.SequenceLength, Stride: s.Stride, Priority: s.Priority,
			PadEndOfEpisodes: s.PadEndOfEpisodes, TileEndOfEpisodes: s.TileEndOfEpisodes, Rows: s.Rows,
		})
	case "episode":
		return observer.NewAddEpisode(b, observer.AddEpisodeConfig{
			Tables: names, MaxSequenceLength: s.MaxSequenceLength, Priority: s.Priority,
			BypassPartialEpisodes: s.BypassPartialEpisodes, Rows: s.Rows,
		})
	}
	return nil, fmt.Errorf("%w: observer kind %q (want add_trajectory, sequence or episode)", tensorbuf.ErrConfig, s.Kind)
}

// trj_writer_new creates a writer of the buffer owning nrows rows (rows
// NULL and nrows 0: every row) and stores its handle at out.
//
//export trj_writer_new
func trj_writer_new(buf C.uint64_t, rows *C.int64_t, nrows C.int64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := handleOut[*bufferObj](buf, kindBuffer, out)
		if e != nil {
			return e
		}
		rs, e := hostSlice[int64](unsafe.Pointer(rows), nrows, "rows")
		if e != nil {
			return e
		}
		ints := make([]int, len(rs))
		for i, r := range rs {
			ints[i] = int(r)
		}
		w, e := bo.b.NewWriter(ints...)
		if e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindWriter, &writerObj{buf: bo, w: w, rows: w.Rows()}))
		return nil
	})
}

// trj_writer_new_observer creates a writer that also creates items, an
// observer configured by JSON (see observerSpec), and stores its handle.
//
//export trj_writer_new_observer
func trj_writer_new_observer(buf C.uint64_t, cfgJSON *C.char, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := handleOut[*bufferObj](buf, kindBuffer, out)
		if e != nil {
			return e
		}
		s, e := goString(cfgJSON, "observer config")
		if e != nil {
			return e
		}
		var os observerSpec
		if e := decodeJSON(s, &os); e != nil {
			return e
		}
		o, e := os.build(bo.b)
		if e != nil {
			return e
		}
		rows := os.Rows
		if rows == nil {
			rows = make([]int, bo.b.NumEnvs())
			for i := range rows {
				rows[i] = i
			}
		}
		*out = C.uint64_t(handles.add(kindWriter, &writerObj{buf: bo, obs: o, rows: rows}))
		return nil
	})
}

// dense views n bytes of caller memory as a tensor of an ABI dtype and
// shape, for the duration of a call.
func dense(p unsafe.Pointer, nbytes int64, code int32, shape []int, what string) (*tensor.Dense, error) {
	elems := int64(1)
	for _, s := range shape {
		if s < 0 || (s > 0 && elems > math.MaxInt32/int64(s)) {
			return nil, fmt.Errorf("%w: %s: shape %v", tensorbuf.ErrShape, what, shape)
		}
		elems *= int64(s)
	}
	size := int64(0)
	switch code {
	case dtFloat64, dtInt64:
		size = 8
	case dtFloat32, dtInt32:
		size = 4
	case dtUint8, dtBool:
		size = 1
	default:
		return nil, fmt.Errorf("%w: %s: dtype code %d", tensorbuf.ErrDType, what, code)
	}
	if elems*size != nbytes {
		return nil, fmt.Errorf("%w: %s: shape %v of %d-byte elements is %d bytes, not the %d given", tensorbuf.ErrShape, what, shape, size, elems*size, nbytes)
	}
	if elems > 0 && p == nil {
		return nil, fmt.Errorf("%w: %s: NULL data", tensorbuf.ErrInvalidArg, what)
	}
	if elems == 0 {
		p = unsafe.Pointer(&zeroBytes[0]) // tensor needs a non-nil backing
	}
	n := int(elems)
	var backing any
	switch code {
	case dtFloat32:
		backing = unsafe.Slice((*float32)(p), n)
	case dtFloat64:
		backing = unsafe.Slice((*float64)(p), n)
	case dtInt32:
		backing = unsafe.Slice((*int32)(p), n)
	case dtInt64:
		backing = unsafe.Slice((*int64)(p), n)
	case dtUint8:
		backing = unsafe.Slice((*uint8)(p), n)
	case dtBool:
		backing = unsafe.Slice((*bool)(p), n)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

var zeroBytes [8]byte

// readStep turns a trj_step into the columns and fields of an add,
// validating every pointer against the lengths given.
func (wo *writerObj) readStep(s *C.trj_step) (rows []int, cols [4]any, fields []*tensor.Dense, err error) {
	if s == nil {
		return nil, cols, nil, fmt.Errorf("%w: NULL step", tensorbuf.ErrInvalidArg)
	}
	nrows := int64(s.nrows)
	if nrows < 0 || nrows > math.MaxInt32 {
		return nil, cols, nil, fmt.Errorf("%w: %d rows", tensorbuf.ErrInvalidArg, nrows)
	}
	if s.rows != nil {
		rs, err := hostSlice[int64](unsafe.Pointer(s.rows), C.int64_t(nrows), "rows")
		if err != nil {
			return nil, cols, nil, err
		}
		rows = make([]int, len(rs))
		for i, r := range rs {
			rows[i] = int(r)
		}
	}
	nc := s.ncols
	st, err1 := hostSlice[tensorbuf.StepType](unsafe.Pointer(s.step_type), nc, "step types")
	nst, err2 := hostSlice[tensorbuf.StepType](unsafe.Pointer(s.next_step_type), nc, "next step types")
	rew, err3 := hostSlice[float32](unsafe.Pointer(s.reward), nc, "rewards")
	disc, err4 := hostSlice[float32](unsafe.Pointer(s.discount), nc, "discounts")
	for _, e := range []error{err1, err2, err3, err4} {
		if e != nil {
			return nil, cols, nil, e
		}
	}
	cols = [4]any{st, nst, rew, disc}
	fs := wo.buf.fields
	if int(s.nfields) != len(fs) {
		return nil, cols, nil, fmt.Errorf("%w: %d fields given, the buffer has %d (%s)", tensorbuf.ErrMissingField, s.nfields, len(fs), fieldNames(fs))
	}
	fields, err = wo.readFields(s.nfields, unsafe.Pointer(s.data), unsafe.Pointer(s.nbytes), unsafe.Pointer(s.dtype),
		unsafe.Pointer(s.ndim), unsafe.Pointer(s.shape), fs)
	if err != nil {
		return nil, cols, nil, err
	}
	return rows, cols, fields, nil
}

// arrayArgs are the caller's arrays of one call, given by position: data
// pointers, sizes in bytes, dtype codes, ranks and the concatenated shapes.
type arrayArgs struct {
	ptrs   []unsafe.Pointer
	sizes  []int64
	dtypes []int32
	ndims  []int32
	shapes []int64
}

// readArrayArgs reads the headers of n caller arrays named after fields,
// validating every pointer, count and rank (the arrays' contents are
// checked by dense).
func readArrayArgs(n C.int64_t, data, nbytes, dtype, ndim, shape unsafe.Pointer, fs []tensorbuf.Field) (arrayArgs, error) {
	var a arrayArgs
	if int(n) != len(fs) {
		return a, fmt.Errorf("%w: %d arrays for %d fields (%s)", tensorbuf.ErrMissingField, n, len(fs), fieldNames(fs))
	}
	var e1, e2, e3, e4 error
	a.ptrs, e1 = hostSlice[unsafe.Pointer](data, n, "field data")
	a.sizes, e2 = hostSlice[int64](nbytes, n, "field sizes")
	a.dtypes, e3 = hostSlice[int32](dtype, n, "field dtypes")
	a.ndims, e4 = hostSlice[int32](ndim, n, "field ranks")
	if err := errors.Join(e1, e2, e3, e4); err != nil {
		return a, err
	}
	total := int64(0)
	for _, d := range a.ndims {
		if d < 0 || d > C.TRJ_MAX_DIMS {
			return a, fmt.Errorf("%w: a field of %d dimensions", tensorbuf.ErrShape, d)
		}
		total += int64(d)
	}
	var err error
	a.shapes, err = hostSlice[int64](shape, C.int64_t(total), "field shapes")
	return a, err
}

// intDims converts field f's shape as the caller gave it.
func intDims(f tensorbuf.Field, dims []int64) ([]int, error) {
	ds := make([]int, len(dims))
	for j, s := range dims {
		if s < 0 || s > math.MaxInt32 {
			return nil, fmt.Errorf("%w: field %q: dimension %d", tensorbuf.ErrShape, f.Name, s)
		}
		ds[j] = int(s)
	}
	return ds, nil
}

// readArrays views n caller arrays given by position (pointers, sizes,
// dtype codes, ranks and concatenated shapes), named after fields, as
// tensors for the duration of a call, validating every pointer and size.
func readArrays(n C.int64_t, data, nbytes, dtype, ndim, shape unsafe.Pointer, fs []tensorbuf.Field) ([]*tensor.Dense, error) {
	a, err := readArrayArgs(n, data, nbytes, dtype, ndim, shape, fs)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Dense, len(fs))
	off := 0
	for i, f := range fs {
		dims, err := intDims(f, a.shapes[off:off+int(a.ndims[i])])
		if err != nil {
			return nil, err
		}
		off += len(dims)
		d, err := dense(a.ptrs[i], a.sizes[i], a.dtypes[i], dims, "field "+f.Name)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// readFields is readArrays for the writer's adds: an array passed as the
// previous add passed it (same address, bytes, dtype and shape) gets the
// tensor made then, as the caller's memory is its own again for this
// call; the others are made anew. The slice returned is the writer's,
// valid until its next add.
func (wo *writerObj) readFields(n C.int64_t, data, nbytes, dtype, ndim, shape unsafe.Pointer, fs []tensorbuf.Field) ([]*tensor.Dense, error) {
	a, err := readArrayArgs(n, data, nbytes, dtype, ndim, shape, fs)
	if err != nil {
		return nil, err
	}
	if len(wo.views) != len(fs) {
		wo.views = make([]arrayView, len(fs))
		wo.fieldBuf = make([]*tensor.Dense, len(fs))
	}
	off := 0
	for i, f := range fs {
		v := &wo.views[i]
		dims := a.shapes[off : off+int(a.ndims[i])]
		off += len(dims)
		if v.d != nil && v.p == a.ptrs[i] && v.nbytes == a.sizes[i] && v.code == a.dtypes[i] && sameDims(v.dims, dims) {
			wo.fieldBuf[i] = v.d
			continue
		}
		v.d = nil
		ds, err := intDims(f, dims)
		if err != nil {
			return nil, err
		}
		d, err := dense(a.ptrs[i], a.sizes[i], a.dtypes[i], ds, "field "+f.Name)
		if err != nil {
			return nil, err
		}
		*v = arrayView{p: a.ptrs[i], nbytes: a.sizes[i], code: a.dtypes[i], dims: slices.Clone(ds), d: d}
		wo.fieldBuf[i] = d
	}
	return wo.fieldBuf, nil
}

// sameDims reports whether a shape read before equals the caller's now.
func sameDims(a []int, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if int64(a[i]) != b[i] {
			return false
		}
	}
	return true
}

func fieldNames(fs []tensorbuf.Field) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += ", "
		}
		s += f.Name
	}
	return s
}

// trj_writer_add adds one batched step (see trj_step). It changes
// nothing unless every row, column and field is valid.
//
//export trj_writer_add
func trj_writer_add(h C.uint64_t, s *C.trj_step, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		wo, e := getAs[*writerObj](uint64(h), kindWriter)
		if e != nil {
			return e
		}
		wo.mu.Lock()
		defer wo.mu.Unlock()
		if wo.closed {
			return fmt.Errorf("%w: writer closed", tensorbuf.ErrClosed)
		}
		rows, cols, fields, e := wo.readStep(s)
		if e != nil {
			return e
		}
		return wo.add(rows, cols, fields)
	})
}

func (wo *writerObj) add(rows []int, cols [4]any, fields []*tensor.Dense) error {
	st, nst := cols[0].([]tensorbuf.StepType), cols[1].([]tensorbuf.StepType)
	rew, disc := cols[2].([]float32), cols[3].([]float32)
	if wo.w != nil {
		wo.step = tensorbuf.Step{Rows: rows, StepType: st, NextStepType: nst, Reward: rew, Discount: disc, Fields: fields}
		err := wo.w.Add(&wo.step)
		wo.step = tensorbuf.Step{}
		return err
	}
	if rows != nil {
		return fmt.Errorf("%w: an observer writer adds all its %d rows at once (rows must be NULL)", tensorbuf.ErrRows, len(wo.rows))
	}
	n := len(wo.rows)
	for _, c := range []int{len(st), len(nst), len(rew), len(disc)} {
		if c != n {
			return fmt.Errorf("%w: columns of %d values for a writer of %d rows", tensorbuf.ErrShape, c, n)
		}
	}
	t := &wo.traj
	*t = driver.Trajectory{StepType: st, NextStepType: nst, Reward: rew, Discount: disc,
		Observation: map[string]*tensor.Dense{}, Action: map[string]*tensor.Dense{}, PolicyInfo: map[string]*tensor.Dense{}}
	for i, f := range wo.buf.fields {
		d := fields[i]
		if sh := d.Shape(); len(sh) != 1+len(f.Shape) || sh[0] != n {
			return fmt.Errorf("%w: %s", tensorbuf.ErrShape, tensorbuf.ShapeMismatch(f, n, sh))
		}
		if d.Dtype() != f.DType.Tensor() {
			return fmt.Errorf("%w: field %q is %v, got %v", tensorbuf.ErrDType, f.Name, f.DType, d.Dtype())
		}
		switch f.Role {
		case tensorbuf.Observation:
			t.Observation[f.Name] = d
		case tensorbuf.Action:
			t.Action[f.Name] = d
		default:
			t.PolicyInfo[f.Name] = d
		}
	}
	err := wo.obs.Observe(t)
	*t = driver.Trajectory{}
	return err
}

// trj_writer_flush makes everything the writer added visible to samplers
// (observers insert pending items).
//
//export trj_writer_flush
func trj_writer_flush(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		wo, e := getAs[*writerObj](uint64(h), kindWriter)
		if e != nil {
			return e
		}
		wo.mu.Lock()
		defer wo.mu.Unlock()
		if wo.obs != nil {
			return wo.obs.Flush()
		}
		return nil
	})
}

// trj_writer_reset resets an observer writer's rows (TF-Agents' observer
// reset): with write_cached its cached steps are padded into items as
// configured. A plain writer has nothing to reset.
//
//export trj_writer_reset
func trj_writer_reset(h C.uint64_t, writeCached C.int32_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		wo, e := getAs[*writerObj](uint64(h), kindWriter)
		if e != nil {
			return e
		}
		wo.mu.Lock()
		defer wo.mu.Unlock()
		if wo.obs != nil {
			return wo.obs.Reset(writeCached != 0)
		}
		return nil
	})
}

// trj_writer_close closes the writer, giving its rows back, and releases
// its handle.
//
//export trj_writer_close
func trj_writer_close(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		obj, e := handles.remove(uint64(h), kindWriter)
		if e != nil {
			return e
		}
		wo := obj.(*writerObj)
		wo.mu.Lock()
		defer wo.mu.Unlock()
		wo.closed = true
		if wo.obs != nil {
			return wo.obs.Close()
		}
		return wo.w.Close()
	})
}

// trj_writer_rows writes the writer's rows (at most cap) into out and
// stores their number at n.
//
//export trj_writer_rows
func trj_writer_rows(h C.uint64_t, out *C.int64_t, cap C.int64_t, n *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		wo, e := handleOut[*writerObj](h, kindWriter, n)
		if e != nil {
			return e
		}
		*n = C.int64_t(len(wo.rows))
		dst, e := hostSlice[int64](unsafe.Pointer(out), cap, "rows")
		if e != nil {
			return e
		}
		for i := range min(len(dst), len(wo.rows)) {
			dst[i] = int64(wo.rows[i])
		}
		return nil
	})
}
