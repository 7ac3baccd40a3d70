package tensorbuf

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
)

// Size limits of one call, checked before anything is allocated so that a
// request too large to serve fails at once with ErrInvalidArg instead of
// allocating until the process dies.
//
// A sample (the direct samplers, table samples and table transitions,
// n-step samples, hindsight samples) may
// take at most SampleBudget(b) bytes of output and scratch memory: the
// larger of the buffer's own memory (MemoryBytes) and MinSampleBudget.
// Training batches are a small fraction of the ring they are drawn from,
// so the ring's size is a bound no real training loop reaches, and it is
// memory the process was already able to hold; the floor keeps small
// buffers (tests, toy environments) free to draw large batches with
// replacement. Every product of sizes is computed with an overflow check.

// MinSampleBudget is the number of bytes a sample may always take, however
// small its buffer.
const MinSampleBudget = 64 << 20

// sampleItemBytes is a generous bound on the host bytes kept per sampled
// result besides its tensors (indices, windows, keys, probabilities,
// weights, relabel records).
const sampleItemBytes = 128

// MaxNumGoals bounds HindsightConfig.NumGoals. The HER paper and SB3 use
// k = 4 and report no gain beyond k = 8; at k = 1024 relabeling at sample
// time relabels all but 0.1% of the transitions, and relabeling at episode
// end already stores 1024 relabeled experiences per transition.
const MaxNumGoals = 1024

// SampleBudget returns the bytes one sample of b may take (see
// MinSampleBudget). It is safe for concurrent use.
func (b *Buffer) SampleBudget() int64 {
	return max(b.MemoryBytes(), MinSampleBudget)
}

// checkSampleSize refuses a sample of n results of l steps each, stepBytes
// bytes per step, whose size overflows or exceeds the sample budget or
// maxBatch steps. what and part name the sample in the error (two strings,
// joined only when it fails, so that a call that passes allocates
// nothing).
func (b *Buffer) checkSampleSize(what, part string, n, l, stepBytes int64) error {
	steps, ok := kernels.Mul(n, l)
	var total int64
	if ok && steps <= maxBatch {
		var per int64
		if per, ok = kernels.Mul(l, stepBytes); ok && per <= math.MaxInt64-sampleItemBytes {
			total, ok = kernels.Mul(n, per+sampleItemBytes)
		} else {
			ok = false
		}
	} else {
		ok = false
	}
	if !ok || total > b.SampleBudget() {
		return fmt.Errorf("%w: %s%s of %d x %d steps (%d bytes a step) exceeds the sample limit of %d bytes (the buffer's memory, at least %d)",
			ErrInvalidArg, what, part, n, l, stepBytes, b.SampleBudget(), MinSampleBudget)
	}
	return nil
}

// stepBytes returns the bytes of one stored step over every field, the
// built-in columns included, and of its observation fields alone, as
// New computed them (sumStepBytes): a sample no longer loops over the
// columns for them.
func (b *Buffer) stepBytes() (all, obs int64) { return b.stepAll, b.stepObs }

// sumStepBytes adds up stepBytes over the buffer's columns.
func (b *Buffer) sumStepBytes() (all, obs int64) {
	for i := range b.cols {
		c := &b.cols[i]
		all += c.stepBytes
		if i < b.nUser && c.Role == Observation {
			obs += c.stepBytes
		}
	}
	return all, obs
}

// checkTransitionsSize refuses a sample of n transitions (and, for n-step
// transitions, of a look-ahead of up to horizon steps each, lookBytes of
// scratch a step) that exceeds the sample limits.
func (b *Buffer) checkTransitionsSize(what string, n int, horizon, lookBytes int64) error {
	all, obs := b.stepBytes()
	// A transition holds a step and its successor's observations, plus one
	// byte of IsDone.
	if err := b.checkSampleSize(what, "", int64(n), 1, all+obs+1); err != nil {
		return err
	}
	if horizon > 1 {
		// A look-ahead never passes the ring: k <= capacity - 1.
		return b.checkSampleSize(what, " look-ahead", int64(n), min(horizon, b.capacity), lookBytes)
	}
	return nil
}
