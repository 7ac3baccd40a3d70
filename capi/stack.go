//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/trajring/trajring/tensorbuf"
)

// The stacked samplers: the sample exports with a frame-stacking spec
// (tensorbuf.FrameStack), a JSON object naming each stacked observation
// field and its K, such as {"pixels": 4}. A stacked field comes back as
// [n, K, ...] in transitions (observation and next observation) and as
// [n, L, K, ...] in sequences; every other field is as without stacking.
// The plain exports stay as they are, so the hot loop of an unstacked
// sample parses nothing.

// parseStack decodes a stacking spec; fields are taken in name order so
// that the request is the same whatever the JSON's key order. The key
// names the request (`"pixels": 4`), so that a refill into a result whose
// tensors are alive can be refused when it would stack differently. An empty
// object is no stacking; a NULL spec, malformed JSON or a K that is no
// JSON integer fails with ErrInvalidArg or ErrConfig, and tensorbuf checks
// the fields and K (ErrConfig) before it draws.
func parseStack(spec *C.char) ([]tensorbuf.FrameStack, string, error) {
	s, err := goString(spec, "stack spec")
	if err != nil {
		return nil, "", err
	}
	var m map[string]int
	if err := decodeJSON(s, &m); err != nil {
		return nil, "", err
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	st := make([]tensorbuf.FrameStack, len(names))
	keys := make([]string, len(names))
	for i, name := range names {
		st[i] = tensorbuf.FrameStack{Field: name, K: m[name]}
		keys[i] = fmt.Sprintf("%q: %d", name, m[name])
	}
	return st, strings.Join(keys, ", "), nil
}

// trj_buffer_sample_sequences_stacked is trj_buffer_sample_sequences with
// the stacking spec stack (tensorbuf SequenceOptions.Stack).
//
//export trj_buffer_sample_sequences_stacked
func trj_buffer_sample_sequences_stacked(h C.uint64_t, n, l C.int64_t, episodeAware C.int32_t, stack *C.char, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if l <= 0 || l > math.MaxInt32 {
			return fmt.Errorf("%w: sequences of %d steps", tensorbuf.ErrInvalidArg, l)
		}
		st, key, e := parseStack(stack)
		if e != nil {
			return e
		}
		opt := tensorbuf.SequenceOptions{EpisodeAware: episodeAware != 0, Stack: st}
		return sampleBuffer(h, n, int(l), key, into, out, kindBatch, func(b *tensorbuf.Buffer, r *result) error {
			return b.SampleSequencesInto(r.bt, int(n), int(l), opt)
		})
	})
}

// trj_buffer_sample_nstep_stacked is trj_buffer_sample_nstep with the
// stacking spec stack (tensorbuf NStepOptions.Stack): horizon 1 and gamma
// 1 give DQN's one-step transitions.
//
//export trj_buffer_sample_nstep_stacked
func trj_buffer_sample_nstep_stacked(h C.uint64_t, n, horizon C.int64_t, gamma C.double, stack *C.char, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		st, key, e := parseStack(stack)
		if e != nil {
			return e
		}
		opt := tensorbuf.NStepOptions{Horizon: int(horizon), DiscountFactor: float64(gamma), Stack: st}
		return sampleBuffer(h, n, 0, key, into, out, kindTransitions, func(b *tensorbuf.Buffer, r *result) error {
			return b.SampleNStepInto(r.tr, int(n), opt)
		})
	})
}

// trj_table_sample_stacked is trj_table_sample with the stacking spec
// stack (tensorbuf Table.SampleStackedInto).
//
//export trj_table_sample_stacked
func trj_table_sample_stacked(h C.uint64_t, n C.int64_t, stack *C.char, waitMS C.int64_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		st, key, e := parseStack(stack)
		if e != nil {
			return e
		}
		return sampleTable(h, n, waitMS, key, into, out, kindBatch, func(ctx context.Context, t *tensorbuf.Table, r *result) error {
			return t.SampleStackedInto(ctx, r.bt, int(n), st)
		})
	})
}

// trj_table_sample_transitions_stacked is trj_table_sample_transitions
// with the stacking spec stack (tensorbuf NStepOptions.Stack).
//
//export trj_table_sample_transitions_stacked
func trj_table_sample_transitions_stacked(h C.uint64_t, n, horizon C.int64_t, gamma C.double, stack *C.char, waitMS C.int64_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		st, key, e := parseStack(stack)
		if e != nil {
			return e
		}
		opt := tensorbuf.NStepOptions{Horizon: int(horizon), DiscountFactor: float64(gamma), Stack: st}
		return sampleTable(h, n, waitMS, key, into, out, kindTableTransitions, func(ctx context.Context, t *tensorbuf.Table, r *result) error {
			return t.SampleTransitionsInto(ctx, r.ttr, int(n), opt)
		})
	})
}
