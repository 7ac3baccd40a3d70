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
	"time"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// trj_env_run_go steps the env steps times in Go with the same actions
// every step (the env's action fields by position, each [num_envs, ...],
// copied into Go memory first) and, with writer not 0, adds each step's
// trajectory through that writer, as trj_env_step does: the loop a Go
// program runs (the env's Step, then the writer's add), for the Python
// benchmark to time in the same process as its Python loop (bench/
// peer_trajring.py). It stores each step's nanoseconds in out_ns[0:steps]
// and leaves the env at its last step (trj_env_step continues from it).
// The env must have been reset; on an error the env needs a reset, and the
// steps before it stay written.
//
//export trj_env_run_go
func trj_env_run_go(h C.uint64_t, actions *C.trj_arrays, writer C.uint64_t, steps C.int64_t, outNS *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		eo, wo, e := envAndWriter(h, writer)
		if e != nil {
			return e
		}
		if steps < 1 || steps > 1<<24 {
			return fmt.Errorf("%w: %d steps (1 to %d)", tensorbuf.ErrInvalidArg, steps, 1<<24)
		}
		ns, e := hostSlice[int64](unsafe.Pointer(outNS), steps, "step timings")
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
		act := make(map[string]*tensor.Dense, len(eo.act))
		for i, f := range eo.act {
			// A copy in Go memory: the caller's array may go.
			c := tensor.New(tensor.Of(ds[i].Dtype()), tensor.WithShape(ds[i].Shape().Clone()...))
			src, e1 := denseBytes(ds[i])
			dst, e2 := denseBytes(c)
			if e := errors.Join(e1, e2); e != nil {
				return e
			}
			copy(dst, src)
			act[f.Name] = c
		}
		if e := driver.CheckTensors(eo.act, eo.numEnvs, act); e != nil {
			return e
		}
		if wo != nil {
			wo.mu.Lock()
			defer wo.mu.Unlock()
			if e := eo.compatible(wo); e != nil {
				return e
			}
		}
		// eo.write reads the step's actions from eo.actions.
		saved := eo.actions
		eo.actions = act
		defer func() { eo.actions = saved }()
		for i := range ns {
			t0 := time.Now()
			prev := eo.cur
			next, e := eo.env.Step(act)
			if e != nil {
				eo.cur = nil
				return e
			}
			eo.cur = next
			if wo != nil {
				if e := eo.write(wo, prev, next); e != nil {
					return e
				}
			}
			ns[i] = int64(time.Since(t0))
		}
		return nil
	})
}
