package tensorbuf

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RateLimiter paces samplers and inserters of a table as Reverb's
// SampleToInsertRatio limiter does. Let diff = inserts*SamplesPerInsert -
// samples. Sampling waits until the table holds MinSize items and, when
// SamplesPerInsert > 0, until diff-1 >= MinSize*SamplesPerInsert -
// ErrorBuffer; inserting waits while the table holds at least MinSize
// items and diff+SamplesPerInsert > MinSize*SamplesPerInsert + ErrorBuffer.
// So once the table holds MinSize items, samplers may run ErrorBuffer
// samples behind the ratio and inserters ErrorBuffer samples ahead of it,
// and a sample asks for at most 2*ErrorBuffer items at once (a larger one
// is refused with ErrInvalidArg).
//
// NewTable refuses (ErrConfig) a limiter under which a side could stop
// for good. As in Reverb, the band between the two limits, 2*ErrorBuffer,
// must hold a whole insert (SamplesPerInsert) and a whole sample (1):
// ErrorBuffer >= max(1, SamplesPerInsert) when SamplesPerInsert > 0.
// ErrorBuffer >= SamplesPerInsert alone is not enough: with MinSize 1,
// SamplesPerInsert 0.2 and ErrorBuffer 0.55, after three inserts an
// insert would pass the upper limit and a sample the lower one, and both
// would wait forever. SamplesPerInsert and ErrorBuffer must be finite,
// at least 0 and at most 2^53 (beyond it float64 cannot count single
// samples). MinSize must be one the table can reach; see MinSize.
// A RateLimiter is a plain value; a table keeps its own copy.
type RateLimiter struct {
	// MinSize is the number of items the table must hold before it can
	// be sampled. It must not exceed what the table can hold: MaxSize
	// when the table sets one, otherwise NumEnvs*Capacity of the buffer,
	// the number of steps the ring stores, which bounds the items of a
	// table holding one item per stored step (the layout of the
	// observers, Reverb's and TF-Agents' writers): items whose first step
	// the ring overwrites are dropped, so such a table never holds more,
	// and a larger MinSize would block samplers forever. A table whose
	// items may outnumber the stored steps (several items per start step,
	// or the same window inserted again) declares it with MaxSize, which
	// then is the bound.
	MinSize int
	// SamplesPerInsert is the target ratio of sampled to inserted items;
	// 0 paces nothing but MinSize.
	SamplesPerInsert float64
	// ErrorBuffer is how far, in samples, either side may run from the
	// ratio; at least max(1, SamplesPerInsert) when SamplesPerInsert > 0.
	ErrorBuffer float64
	// Timeout bounds each wait; 0 waits until the context is done.
	Timeout time.Duration
}

// notifyLocked wakes the goroutines waiting for a change of the table.
// The channel is made only when somebody waits, so changes without
// waiters allocate nothing.
func (t *Table) notifyLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// maxRate bounds SamplesPerInsert and ErrorBuffer: up to 2^53 a float64
// counts every single sample.
const maxRate = 1 << 53

// validate refuses a limiter under which samplers or inserters could stop
// for good (see RateLimiter); maxSize is the table's MaxSize and steps
// the number of steps the ring stores.
func (rl *RateLimiter) validate(maxSize int, steps int64) error {
	switch {
	case rl.MinSize < 0 || rl.Timeout < 0:
		return errors.New("negative MinSize or Timeout")
	case !finiteNonNeg(rl.SamplesPerInsert) || !finiteNonNeg(rl.ErrorBuffer) ||
		rl.SamplesPerInsert > maxRate || rl.ErrorBuffer > maxRate:
		return errors.New("SamplesPerInsert and ErrorBuffer must be finite, in [0, 2^53]")
	case rl.SamplesPerInsert > 0 && rl.ErrorBuffer < max(1, rl.SamplesPerInsert):
		return fmt.Errorf("ErrorBuffer %v is below max(1, SamplesPerInsert) = %v: samplers and inserters could both block forever",
			rl.ErrorBuffer, max(1, rl.SamplesPerInsert))
	case maxSize > 0 && rl.MinSize > maxSize:
		return fmt.Errorf("MinSize %d exceeds MaxSize %d: the table could never be sampled", rl.MinSize, maxSize)
	case maxSize == 0 && int64(rl.MinSize) > steps:
		return fmt.Errorf("MinSize %d exceeds the %d steps the ring stores; set MaxSize for a table with more items than steps", rl.MinSize, steps)
	}
	return nil
}

func (t *Table) canInsertLocked(int) bool {
	rl := t.cfg.RateLimiter
	if rl == nil || rl.SamplesPerInsert == 0 || len(t.live) < rl.MinSize {
		return true
	}
	diff := float64(t.inserts)*rl.SamplesPerInsert - float64(t.samples)
	return diff+rl.SamplesPerInsert <= float64(rl.MinSize)*rl.SamplesPerInsert+rl.ErrorBuffer
}

// maxBatch bounds the items of one sample, so that sizes computed from
// it cannot overflow.
const maxBatch = 1 << 31

// checkBatch refuses sample sizes that could never be served: a
// samples-per-insert limiter lets samplers run at most 2*ErrorBuffer
// samples ahead of inserters, so a larger batch would wait forever.
func (t *Table) checkBatch(n int) error {
	if n > maxBatch {
		return fmt.Errorf("%w: sample of %d items", ErrInvalidArg, n)
	}
	if rl := t.cfg.RateLimiter; rl != nil && rl.SamplesPerInsert > 0 && float64(n) > 2*rl.ErrorBuffer {
		return fmt.Errorf("%w: a sample of %d items exceeds twice the rate limiter's error buffer (%v) and could never be served",
			ErrInvalidArg, n, rl.ErrorBuffer)
	}
	return nil
}

func (t *Table) canSampleLocked(n int) bool {
	if len(t.live) == 0 || (t.cfg.MaxTimesSampled > 0 && t.budget < int64(n)) {
		return false
	}
	rl := t.cfg.RateLimiter
	if rl == nil {
		return true
	}
	if len(t.live) < max(rl.MinSize, 1) {
		return false
	}
	if rl.SamplesPerInsert == 0 {
		return true
	}
	diff := float64(t.inserts)*rl.SamplesPerInsert - float64(t.samples)
	return diff-float64(n) >= float64(rl.MinSize)*rl.SamplesPerInsert-rl.ErrorBuffer
}

// ctxErr is waitN's check of its context: a nil ctx is refused with
// ErrInvalidArg, a done one gives its error.
func (t *Table) ctxErr(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: table %q: nil context", ErrInvalidArg, t.cfg.Name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("table %q: %w", t.cfg.Name, err)
	}
	return nil
}

// wait blocks until ok holds (checked under the table's lock), the
// context is done, the limiter's timeout passes or the buffer closes.
// Without a rate limiter it never blocks: it fails with ErrEmpty for a
// sampler that cannot be served.
func (t *Table) wait(ctx context.Context, ok func(n int) bool) error { return t.waitN(ctx, ok, 0) }

func (t *Table) waitN(ctx context.Context, ok func(n int) bool, n int) error {
	if err := t.ctxErr(ctx); err != nil {
		return err
	}
	var timeout <-chan time.Time
	for {
		t.mu.Lock()
		if t.b.closedFlag.Load() {
			t.mu.Unlock()
			return fmt.Errorf("%w: table %q", ErrClosed, t.cfg.Name)
		}
		if ok(n) {
			t.mu.Unlock()
			return nil
		}
		rl := t.cfg.RateLimiter
		if rl == nil {
			size, budget := len(t.live), t.budget
			t.mu.Unlock()
			return fmt.Errorf("%w: table %q holds %d items (%d samples left), asked for %d", ErrEmpty, t.cfg.Name, size, budget, n)
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		if timeout == nil && rl.Timeout > 0 {
			timer := time.NewTimer(rl.Timeout)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("table %q: %w", t.cfg.Name, ctx.Err())
		case <-timeout:
			return fmt.Errorf("%w: table %q after %v", ErrRateLimited, t.cfg.Name, rl.Timeout)
		}
	}
}

// CanSample reports whether a sample of n items would be served now
// without waiting: the table holds enough items (and, with
// MaxTimesSampled, enough samples left) and its rate limiter lets n
// samples through. It waits for nothing and changes nothing; another
// goroutine may change the answer before the caller acts on it. It is
// false for n < 1, for a sample the table could never serve (see
// SampleInto) and after the buffer is closed. Safe for concurrent use.
func (t *Table) CanSample(n int) bool {
	if n < 1 || t.checkBatch(n) != nil || t.b.closedFlag.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.canSampleLocked(n)
}

// CanInsert reports whether an insert would pass the rate limiter now
// without waiting (always true without a samples-per-insert limiter; a
// full table makes room by removing its oldest item). It does not check
// an item's steps, waits for nothing and changes nothing. It is false
// after the buffer is closed. Safe for concurrent use.
func (t *Table) CanInsert() bool {
	if t.b.closedFlag.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.canInsertLocked(0)
}
