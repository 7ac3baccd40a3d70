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
	"sort"
	"sync"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// EnvFactory builds a batched environment of numEnvs rows from a seed.
// The environment follows driver.Environment's auto-reset convention
// (the step after a row's Last step starts its next episode).
type EnvFactory func(numEnvs int, seed uint64) (driver.Environment, error)

var envRegistry = struct {
	sync.RWMutex
	m map[string]EnvFactory
}{m: map[string]EnvFactory{}}

// RegisterEnv makes a batched Go environment available to the C ABI (and
// so to Python's trajring.make) under name. A main package that builds
// the shared library calls it from an init function (see docs/python.md).
// It fails for an empty or taken name or a nil factory. Safe for
// concurrent use.
func RegisterEnv(name string, f EnvFactory) error {
	if name == "" || f == nil {
		return fmt.Errorf("%w: RegisterEnv(%q, %v): a name and a factory are needed", tensorbuf.ErrConfig, name, f != nil)
	}
	envRegistry.Lock()
	defer envRegistry.Unlock()
	if _, ok := envRegistry.m[name]; ok {
		return fmt.Errorf("%w: env %q registered twice", tensorbuf.ErrConfig, name)
	}
	envRegistry.m[name] = f
	return nil
}

// RegisterParallel registers an environment made of one driver.Env per
// row, stepped by driver.Parallel on up to GOMAXPROCS goroutines: newEnv
// builds row r's environment from the seed (give each row its own stream
// of the seed).
func RegisterParallel(name string, newEnv func(row int, seed uint64) (driver.Env, error)) error {
	if newEnv == nil {
		return fmt.Errorf("%w: RegisterParallel(%q): nil constructor", tensorbuf.ErrConfig, name)
	}
	return RegisterEnv(name, func(n int, seed uint64) (driver.Environment, error) {
		if n < 1 {
			return nil, fmt.Errorf("%w: %d envs", tensorbuf.ErrConfig, n)
		}
		es := make([]driver.Env, n)
		for r := range es {
			e, err := newEnv(r, seed)
			if err != nil {
				return nil, err
			}
			es[r] = e
		}
		return driver.NewParallel(es, 0)
	})
}

func init() {
	for name, f := range map[string]EnvFactory{
		"CartPole-v1": func(n int, seed uint64) (driver.Environment, error) { return envs.NewCartPole(n, seed) },
		"Noop":        func(n int, _ uint64) (driver.Environment, error) { return envs.NewNoop(n) },
	} {
		if err := RegisterEnv(name, f); err != nil {
			panic(err)
		}
	}
}

// envNames returns the registered names, sorted.
func envNames() []string {
	envRegistry.RLock()
	defer envRegistry.RUnlock()
	names := make([]string, 0, len(envRegistry.m))
	for n := range envRegistry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// envObj is a batched environment handed out through the ABI. Calls are
// serialised by mu.
type envObj struct {
	mu       sync.Mutex
	name     string
	factory  EnvFactory
	numEnvs  int
	env      driver.Environment
	obs, act []tensorbuf.Field
	cur      *driver.TimeStep // nil until reset, and after a failed step
	closed   bool
	actions  map[string]*tensor.Dense
	step     tensorbuf.Step
}

//export trj_env_make
func trj_env_make(name *C.char, numEnvs C.int64_t, seed C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if out == nil {
			return setOut(out, 0)
		}
		n, e := goString(name, "env name")
		if e != nil {
			return e
		}
		envRegistry.RLock()
		f, ok := envRegistry.m[n]
		envRegistry.RUnlock()
		if !ok {
			return fmt.Errorf("%w: no env %q (registered: %v)", tensorbuf.ErrConfig, n, envNames())
		}
		if numEnvs < 1 || numEnvs > math.MaxInt32 {
			return fmt.Errorf("%w: %d envs", tensorbuf.ErrConfig, numEnvs)
		}
		eo := &envObj{name: n, factory: f, numEnvs: int(numEnvs)}
		if e := eo.build(uint64(seed)); e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindEnv, eo))
		return nil
	})
}

// build makes the environment from the factory and checks its specs.
func (eo *envObj) build(seed uint64) error {
	env, err := eo.factory(eo.numEnvs, seed)
	if err != nil {
		return fmt.Errorf("%w: making %s: %w", driver.ErrEnv, eo.name, err)
	}
	if env.BatchSize() != eo.numEnvs {
		return fmt.Errorf("%w: %s made %d rows, %d asked", driver.ErrEnv, eo.name, env.BatchSize(), eo.numEnvs)
	}
	if eo.env != nil {
		if c, ok := eo.env.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
	eo.env, eo.obs, eo.act, eo.cur = env, env.ObservationSpec(), env.ActionSpec(), nil
	eo.actions = make(map[string]*tensor.Dense, len(eo.act))
	return nil
}

type envSpec struct {
	Name        string         `json:"name"`
	NumEnvs     int            `json:"num_envs"`
	Observation []envFieldSpec `json:"observation"`
	Action      []envFieldSpec `json:"action"`
	Registered  []string       `json:"registered"`
}

type envFieldSpec struct {
	fieldSpec
	Min []float64 `json:"min"`
	Max []float64 `json:"max"`
}

func specOf(fs []tensorbuf.Field) []envFieldSpec {
	out := []envFieldSpec{}
	for _, f := range fs {
		out = append(out, envFieldSpec{
			fieldSpec: fieldSpec{Name: f.Name, Role: f.Role.String(), DType: f.DType.String(), Shape: append([]int{}, f.Shape...)},
			Min:       finite(f.Min), Max: finite(f.Max),
		})
	}
	return out
}

// finite replaces infinities (which JSON cannot carry) by ±MaxFloat64.
func finite(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Max(-math.MaxFloat64, math.Min(math.MaxFloat64, x))
	}
	return out
}

// trj_env_spec writes the env's observation and action fields (with
// their bounds) as JSON.
//
//export trj_env_spec
func trj_env_spec(h C.uint64_t, out *C.char, outcap C.int64_t, needed *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		eo, e := getAs[*envObj](uint64(h), kindEnv)
		if e != nil {
			return e
		}
		eo.mu.Lock()
		defer eo.mu.Unlock()
		return writeJSON(envSpec{Name: eo.name, NumEnvs: eo.numEnvs, Observation: specOf(eo.obs), Action: specOf(eo.act), Registered: envNames()}, out, outcap, needed)
	})
}

// writeOut copies a time step into the caller's arrays, checking every
// size first, and refuses non-finite observations.
func (eo *envObj) writeOut(ts *driver.TimeStep, o *C.trj_env_out) error {
	if o == nil {
		return fmt.Errorf("%w: NULL outputs", tensorbuf.ErrInvalidArg)
	}
	if int(o.nobs) != len(eo.obs) {
		return fmt.Errorf("%w: %d observation outputs for %d fields", tensorbuf.ErrInvalidArg, o.nobs, len(eo.obs))
	}
	nf := C.int64_t(len(eo.obs))
	ptrs, e1 := hostSlice[unsafe.Pointer](unsafe.Pointer(o.obs), nf, "observation outputs")
	sizes, e2 := hostSlice[int64](unsafe.Pointer(o.obs_nbytes), nf, "observation sizes")
	if err := errors.Join(e1, e2); err != nil {
		return err
	}
	srcs := make([][]byte, len(eo.obs))
	for i, f := range eo.obs {
		d := ts.Observation[f.Name]
		if d == nil {
			return fmt.Errorf("%w: %s returned no observation %q", driver.ErrEnv, eo.name, f.Name)
		}
		b, err := denseBytes(d)
		if err != nil {
			return err
		}
		if int64(len(b)) != sizes[i] || (len(b) > 0 && ptrs[i] == nil) {
			return fmt.Errorf("%w: observation %q is %d bytes, the output %d", tensorbuf.ErrShape, f.Name, len(b), sizes[i])
		}
		if err := checkFinite(d, f.Name, eo.name); err != nil {
			return err
		}
		srcs[i] = b
	}
	for i, b := range srcs {
		if len(b) > 0 {
			copy(unsafe.Slice((*byte)(ptrs[i]), len(b)), b)
		}
	}
	n := eo.numEnvs
	if o.reward != nil {
		copy(unsafe.Slice((*float32)(unsafe.Pointer(o.reward)), n), ts.Reward)
	}
	if o.step_type != nil {
		copy(unsafe.Slice((*tensorbuf.StepType)(unsafe.Pointer(o.step_type)), n), ts.StepType)
	}
	term, trunc := (*uint8)(unsafe.Pointer(o.terminated)), (*uint8)(unsafe.Pointer(o.truncated))
	for r := range n {
		last := ts.StepType[r] == tensorbuf.Last
		if term != nil {
			*(*uint8)(unsafe.Add(unsafe.Pointer(term), r)) = b2u(last && ts.Discount[r] == 0)
		}
		if trunc != nil {
			*(*uint8)(unsafe.Add(unsafe.Pointer(trunc), r)) = b2u(last && ts.Discount[r] != 0)
		}
	}
	return nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// denseBytes returns the bytes of a host tensor.
func denseBytes(d *tensor.Dense) ([]byte, error) {
	n := int(d.MemSize())
	if n == 0 {
		return nil, nil
	}
	p := hostPointer(d)
	if p == nil {
		return nil, fmt.Errorf("%w: an env tensor without host memory", tensorbuf.ErrDeviceTensor)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// checkFinite refuses NaN or infinite float observations: a learner fed
// them diverges far from the step that made them.
func checkFinite(d *tensor.Dense, field, env string) error {
	var bad = -1
	switch v := d.Data().(type) {
	case []float32:
		if allFinite(v) {
			return nil
		}
		for i, x := range v {
			if x != x || math.IsInf(float64(x), 0) {
				bad = i
				break
			}
		}
	case []float64:
		if allFinite(v) {
			return nil
		}
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				bad = i
				break
			}
		}
	}
	if bad >= 0 {
		return fmt.Errorf("%w: %s observation %q element %d is not finite; reset the env", driver.ErrEnv, env, field, bad)
	}
	return nil
}

// allFinite reports whether every value is finite: x*0 is (±)0 for a finite
// x and NaN for NaN and ±Inf, so four running sums of it stay 0 (no
// branch a value; the per-value checks took a twentieth of a CartPole x
// 256 step from Python).
func allFinite[T float32 | float64](v []T) bool {
	var a0, a1, a2, a3 T
	i := 0
	for ; i+4 <= len(v); i += 4 {
		a0 += v[i] * 0
		a1 += v[i+1] * 0
		a2 += v[i+2] * 0
		a3 += v[i+3] * 0
	}
	for ; i < len(v); i++ {
		a0 += v[i] * 0
	}
	return a0+a1+a2+a3 == 0
}

// trj_env_reset resets every row (reseeding the env first when
// reseed is not 0) and writes the first observations into out.
//
//export trj_env_reset
func trj_env_reset(h C.uint64_t, reseed C.int32_t, seed C.uint64_t, out *C.trj_env_out, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		eo, e := getAs[*envObj](uint64(h), kindEnv)
		if e != nil {
			return e
		}
		eo.mu.Lock()
		defer eo.mu.Unlock()
		if eo.closed {
			return fmt.Errorf("%w: env closed", driver.ErrClosed)
		}
		if reseed != 0 {
			if e := eo.build(uint64(seed)); e != nil {
				return e
			}
		}
		eo.cur = nil
		ts, e := eo.env.Reset()
		if e != nil {
			return fmt.Errorf("%w: %s reset: %w", driver.ErrEnv, eo.name, e)
		}
		if e := eo.writeOut(ts, out); e != nil {
			return e
		}
		eo.cur = ts
		return nil
	})
}

// trj_env_step steps every row with the actions (the env's action fields
// by position, each [num_envs, ...]) and writes the next observations,
// rewards and flags into out. With writer not 0 it also adds the
// trajectory of the step (TF-Agents': the observation and action at t,
// the step types, reward and discount of t+1) through that writer, as
// the Go driver does. Actions, outputs and the writer's buffer are
// checked before the env steps; an env failure, or a non-finite
// observation, leaves the env needing a reset and writes nothing.
//
//export trj_env_step
func trj_env_step(h C.uint64_t, actions *C.trj_arrays, writer C.uint64_t, out *C.trj_env_out, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		eo, wo, e := envAndWriter(h, writer)
		if e != nil {
			return e
		}
		eo.mu.Lock()
		defer eo.mu.Unlock()
		if e := eo.steppableLocked(); e != nil {
			return e
		}
		ds, e := eo.readActions(actions)
		if e != nil {
			return e
		}
		clear(eo.actions)
		for i, f := range eo.act {
			eo.actions[f.Name] = ds[i]
		}
		if e := driver.CheckTensors(eo.act, eo.numEnvs, eo.actions); e != nil {
			return e
		}
		if e := eo.checkOut(out); e != nil {
			return e
		}
		if wo != nil {
			wo.mu.Lock()
			defer wo.mu.Unlock()
			if e := eo.compatible(wo); e != nil {
				return e
			}
		}
		prev := eo.cur
		next, e := eo.env.Step(eo.actions)
		if e != nil {
			if errors.Is(e, driver.ErrNotReset) || errors.Is(e, driver.ErrEnv) {
				eo.cur = nil
			}
			return e
		}
		if e := eo.writeOut(next, out); e != nil {
			eo.cur = nil
			return e
		}
		eo.cur = next
		if wo == nil {
			return nil
		}
		return eo.write(wo, prev, next)
	})
}

// envAndWriter looks up the env of handle h and, when writer is not 0,
// the writer its steps are written through.
func envAndWriter(h, writer C.uint64_t) (*envObj, *writerObj, error) {
	eo, err := getAs[*envObj](uint64(h), kindEnv)
	if err != nil || writer == 0 {
		return eo, nil, err
	}
	wo, err := getAs[*writerObj](uint64(writer), kindWriter)
	return eo, wo, err
}

// steppableLocked refuses a step of a closed env or of one not reset
// (never, or since a failed step). Called with eo.mu held.
func (eo *envObj) steppableLocked() error {
	if eo.closed {
		return fmt.Errorf("%w: env closed", driver.ErrClosed)
	}
	if eo.cur == nil {
		return fmt.Errorf("%w: %s: call reset first (after a failed step too)", driver.ErrNotReset, eo.name)
	}
	return nil
}

// readActions views the caller's action arrays (one per action field, in
// the env's order) as tensors, checking their count, dtypes and shapes
// ([num_envs, ...field shape]); trj_env_step and the benchmark's
// trj_env_run_go take actions through it alike. The tensors view the
// caller's memory: valid for the call only.
func (eo *envObj) readActions(actions *C.trj_arrays) ([]*tensor.Dense, error) {
	if actions == nil {
		return nil, fmt.Errorf("%w: NULL actions", tensorbuf.ErrInvalidArg)
	}
	if int(actions.n) != len(eo.act) {
		return nil, fmt.Errorf("%w: %d action arrays for %d action fields", tensorbuf.ErrMissingField, actions.n, len(eo.act))
	}
	ds, e := readArrays(actions.n, unsafe.Pointer(actions.data), unsafe.Pointer(actions.nbytes), unsafe.Pointer(actions.dtype),
		unsafe.Pointer(actions.ndim), unsafe.Pointer(actions.shape), eo.act)
	if e != nil {
		return nil, e
	}
	for i, f := range eo.act {
		if ds[i].Dtype() != f.DType.Tensor() {
			return nil, fmt.Errorf("%w: action %q is %v, env %s takes %v", tensorbuf.ErrDType, f.Name, ds[i].Dtype(), eo.name, f.DType)
		}
		if want := append([]int{eo.numEnvs}, f.Shape...); !slices.Equal(ds[i].Shape(), want) {
			return nil, fmt.Errorf("%w: action %q is shaped %v, env %s takes %v", tensorbuf.ErrShape, f.Name, ds[i].Shape(), eo.name, want)
		}
	}
	return ds, nil
}

// checkOut checks the output arrays' sizes before a step.
func (eo *envObj) checkOut(o *C.trj_env_out) error {
	if o == nil || int(o.nobs) != len(eo.obs) {
		return fmt.Errorf("%w: outputs for %d observation fields needed", tensorbuf.ErrInvalidArg, len(eo.obs))
	}
	nf := C.int64_t(len(eo.obs))
	ptrs, e1 := hostSlice[unsafe.Pointer](unsafe.Pointer(o.obs), nf, "observation outputs")
	sizes, e2 := hostSlice[int64](unsafe.Pointer(o.obs_nbytes), nf, "observation sizes")
	if err := errors.Join(e1, e2); err != nil {
		return err
	}
	for i, f := range eo.obs {
		want := int64(eo.numEnvs) * int64(f.StepBytes())
		if sizes[i] != want || (want > 0 && ptrs[i] == nil) {
			return fmt.Errorf("%w: output of observation %q is %d bytes, want %d", tensorbuf.ErrShape, f.Name, sizes[i], want)
		}
	}
	return nil
}

// compatible checks that the writer's buffer stores exactly the env's
// observation and action fields and that the writer takes every row.
func (eo *envObj) compatible(wo *writerObj) error {
	if wo.closed {
		return fmt.Errorf("%w: writer closed", tensorbuf.ErrClosed)
	}
	if len(wo.rows) != eo.numEnvs {
		return fmt.Errorf("%w: the writer has %d rows, the env %d", tensorbuf.ErrRows, len(wo.rows), eo.numEnvs)
	}
	want := append(slices.Clone(eo.obs), eo.act...)
	have := wo.buf.fields
	for _, f := range want {
		i := slices.IndexFunc(have, func(g tensorbuf.Field) bool { return g.Name == f.Name })
		if i < 0 {
			return fmt.Errorf("%w: the writer's buffer has no field %q of env %s (it has %s)", tensorbuf.ErrMissingField, f.Name, eo.name, fieldNames(have))
		}
		g := have[i]
		if g.Role != f.Role || g.DType != f.DType || !slices.Equal(g.Shape, f.Shape) {
			return fmt.Errorf("%w: buffer field %q is %v %v %v, env %s's is %v %v %v", tensorbuf.ErrShape, f.Name, g.Role, g.DType, g.Shape, eo.name, f.Role, f.DType, f.Shape)
		}
	}
	if len(have) != len(want) {
		return fmt.Errorf("%w: the writer's buffer stores %s; env %s gives %s", tensorbuf.ErrMissingField, fieldNames(have), eo.name, fieldNames(want))
	}
	return nil
}

// write adds the trajectory prev -> next through the writer.
func (eo *envObj) write(wo *writerObj, prev, next *driver.TimeStep) error {
	cols := [4]any{prev.StepType, next.StepType, next.Reward, next.Discount}
	fs := wo.buf.fields
	fields := make([]*tensor.Dense, len(fs))
	for i, f := range fs {
		if f.Role == tensorbuf.Observation {
			fields[i] = prev.Observation[f.Name]
		} else {
			fields[i] = eo.actions[f.Name]
		}
	}
	return wo.add(nil, cols, fields)
}

// trj_env_close closes the env and releases its handle.
//
//export trj_env_close
func trj_env_close(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		obj, e := handles.remove(uint64(h), kindEnv)
		if e != nil {
			return e
		}
		eo := obj.(*envObj)
		eo.mu.Lock()
		defer eo.mu.Unlock()
		eo.closed = true
		if c, ok := eo.env.(interface{ Close() error }); ok {
			return c.Close()
		}
		return nil
	})
}
