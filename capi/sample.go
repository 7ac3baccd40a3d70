//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/tensorbuf"
)

func sampleCount(n C.int64_t) error {
	if n <= 0 || n > math.MaxInt32 {
		return fmt.Errorf("%w: sample of %d", tensorbuf.ErrInvalidArg, n)
	}
	return nil
}

// trj_buffer_sample_sequences samples n windows of l steps uniformly
// (tensorbuf Buffer.SampleSequencesInto) into the result into, or a new
// one when into is 0, and stores its handle at out.
//
//export trj_buffer_sample_sequences
func trj_buffer_sample_sequences(h C.uint64_t, n, l C.int64_t, episodeAware C.int32_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if l <= 0 || l > math.MaxInt32 {
			return fmt.Errorf("%w: sequences of %d steps", tensorbuf.ErrInvalidArg, l)
		}
		opt := tensorbuf.SequenceOptions{EpisodeAware: episodeAware != 0}
		return sampleBuffer(h, n, int(l), "", into, out, kindBatch, func(b *tensorbuf.Buffer, r *result) error {
			return b.SampleSequencesInto(r.bt, int(n), int(l), opt)
		})
	})
}

// trj_buffer_sample_transitions samples n transitions uniformly
// (tensorbuf Buffer.SampleTransitionsInto), as trj_buffer_sample_sequences
// does.
//
//export trj_buffer_sample_transitions
func trj_buffer_sample_transitions(h C.uint64_t, n C.int64_t, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		return sampleBuffer(h, n, 0, "", into, out, kindTransitions, func(b *tensorbuf.Buffer, r *result) error {
			return b.SampleTransitionsInto(r.tr, int(n))
		})
	})
}

// trj_buffer_sample_nstep samples n n-step transitions uniformly
// (tensorbuf Buffer.SampleNStepInto; horizon, discount gamma).
//
//export trj_buffer_sample_nstep
func trj_buffer_sample_nstep(h C.uint64_t, n, horizon C.int64_t, gamma C.double, into C.uint64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		opt := tensorbuf.NStepOptions{Horizon: int(horizon), DiscountFactor: float64(gamma)}
		return sampleBuffer(h, n, 0, "", into, out, kindTransitions, func(b *tensorbuf.Buffer, r *result) error {
			return b.SampleNStepInto(r.tr, int(n), opt)
		})
	})
}

// sampleBuffer is the body of the direct sample exports: it checks the
// buffer and n and fills a result of kind k (of L l, 0 for transitions)
// with sample.
func sampleBuffer(h C.uint64_t, n C.int64_t, l int, stack string, into C.uint64_t, out *C.uint64_t, k resultKind,
	sample func(b *tensorbuf.Buffer, r *result) error) error {
	bo, err := getAs[*bufferObj](uint64(h), kindBuffer)
	if err != nil {
		return err
	}
	if err := sampleCount(n); err != nil {
		return err
	}
	return fill(bo, nil, uint64(into), k, int(n), l, stack, func(r *result) error { return sample(bo.b, r) }, out)
}

// trj_buffer_all_experiences exports every stored transition oldest first
// (MATLAB's allExperiences; tensorbuf Buffer.AllNStepExperiences) as one
// result: mode 2 (ExportBatch, [N, 1, ...]) or 3 (ExportSequence, [1, N,
// ...]); horizon 1 and gamma 1 give one-step transitions.
//
//export trj_buffer_all_experiences
func trj_buffer_all_experiences(h C.uint64_t, mode C.int32_t, horizon C.int64_t, gamma C.double, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := handleOut[*bufferObj](h, kindBuffer, out)
		if e != nil {
			return e
		}
		m := tensorbuf.ExportMode(mode)
		if m != tensorbuf.ExportBatch && m != tensorbuf.ExportSequence {
			return fmt.Errorf("%w: export mode %d (want 2, batch, or 3, sequence)", tensorbuf.ErrInvalidArg, mode)
		}
		exp, e := bo.b.AllNStepExperiences(m, tensorbuf.NStepOptions{Horizon: int(horizon), DiscountFactor: float64(gamma)})
		if e != nil {
			return e
		}
		r := &result{buf: bo, kind: kindTransitions, tr: exp[0], exported: true}
		r.mu.Lock()
		defer r.mu.Unlock()
		if e := r.refresh(); e != nil {
			r.release()
			return e
		}
		r.handle = handles.add(kindResult, r)
		*out = C.uint64_t(r.handle)
		return nil
	})
}
