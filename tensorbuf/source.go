package tensorbuf

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// BatchSource samples a table into k batches used in turn, so that a
// learner reads batch i while batch i+1 is gathered (k = 2 is double
// buffering). On a Streamer backend (the gpu backend) each batch comes
// with a ready event, recorded after its gather, for the learner's stream
// to wait on; the learner hands the batch back with Done and the CUevent
// it recorded after its last read of it, and the gather that next reuses
// the batch waits for that event on the device: no host Sync anywhere. On
// host backends the events are nil and a batch is free when Done is
// called.
//
// A batch not handed back is never overwritten: Next fails with
// ErrInvalidArg when the batch it would reuse is still out. BatchSource
// is safe for concurrent use; Next calls are serialised.
type BatchSource struct {
	mu      sync.Mutex
	t       *Table
	n       int
	st      Streamer // nil on host backends
	batches []*Batch
	ready   []Event
	out     []bool    // handed out by Next, not yet Done
	done    []uintptr // the consumer's CUevent to wait for before reuse
	next    int
	closed  bool
}

// NewBatchSource returns a source of batches of n items from t, k deep.
// It fails with ErrInvalidArg when n or k is below 1, and ErrBackend when
// the backend cannot create events.
func NewBatchSource(t *Table, n, k int) (*BatchSource, error) {
	if t == nil || n < 1 || k < 1 {
		return nil, fmt.Errorf("%w: batch source of %d items, %d deep", ErrInvalidArg, n, k)
	}
	s := &BatchSource{t: t, n: n, batches: make([]*Batch, k), ready: make([]Event, k), out: make([]bool, k), done: make([]uintptr, k)}
	s.st, _ = t.b.be.(Streamer)
	for i := range s.batches {
		s.batches[i] = new(Batch)
		if s.st != nil {
			ev, err := s.st.NewEvent()
			if err != nil {
				_ = s.Close()
				return nil, fmt.Errorf("%w: batch source event: %w", ErrBackend, err)
			}
			s.ready[i] = ev
		}
	}
	return s, nil
}

// Next samples into the next batch in turn and returns it with its ready
// event (nil on host backends). On a Streamer backend the gather first
// waits, on the device, for the consumer event given to Done for this
// batch, and the ready event is recorded after the gather. A failed
// sample leaves the batch free.
func (s *BatchSource) Next(ctx context.Context) (*Batch, Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, fmt.Errorf("%w: BatchSource.Next", ErrClosed)
	}
	i := s.next
	if s.out[i] {
		return nil, nil, fmt.Errorf("%w: batch %d of the source is still in use: call Done first (%d deep)", ErrInvalidArg, i, len(s.batches))
	}
	if s.st != nil && s.done[i] != 0 {
		if err := s.st.WaitHandle(s.done[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: waiting for the consumer: %w", ErrBackend, err)
		}
		s.done[i] = 0
	}
	bt := s.batches[i]
	if err := s.t.SampleInto(ctx, bt, s.n); err != nil {
		return nil, nil, err
	}
	if s.st != nil {
		if err := s.st.Record(s.ready[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: recording the ready event: %w", ErrBackend, err)
		}
	}
	s.out[i] = true
	s.next = (i + 1) % len(s.batches)
	return bt, s.ready[i], nil
}

// Done hands bt back: the source may overwrite it once the CUevent
// consumerDone (recorded on the consumer's stream after its last read of
// bt) has completed; 0 means at once (a host consumer, or one that has
// synchronised). It fails with ErrInvalidArg for a batch that is not out.
func (s *BatchSource) Done(bt *Batch, consumerDone uintptr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.batches {
		if b == bt {
			if !s.out[i] {
				return fmt.Errorf("%w: batch handed back twice", ErrInvalidArg)
			}
			s.out[i] = false
			s.done[i] = consumerDone
			return nil
		}
	}
	return fmt.Errorf("%w: batch not from this source", ErrInvalidArg)
}

// Close waits for nothing, destroys the events and releases the batches'
// memory; batches from the source are invalid afterwards.
func (s *BatchSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: BatchSource.Close", ErrClosed)
	}
	s.closed = true
	var errs []error
	for i, b := range s.batches {
		if b != nil {
			errs = append(errs, b.Release())
		}
		if s.ready[i] != nil {
			errs = append(errs, s.ready[i].Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: closing a batch source: %w", ErrBackend, err)
	}
	return nil
}
