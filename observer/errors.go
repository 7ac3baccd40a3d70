package observer

import "errors"

// Sentinel errors. Every error this package returns wraps one of these or
// an error of package tensorbuf (test with errors.Is); errors caused by
// the buffer wrap both.
var (
	// ErrConfig reports an invalid observer configuration: a
	// non-positive length or stride, tile without pad, an unknown table,
	// a sequence longer than the buffer's capacity, bad rows.
	ErrConfig = errors.New("observer: invalid configuration")
	// ErrClosed reports use of a closed observer (reopen it with Open).
	ErrClosed = errors.New("observer: closed")
	// ErrTrajectory reports a trajectory that does not fit the observer:
	// wrong batch size, missing field, wrong dtype or shape, invalid step
	// type.
	ErrTrajectory = errors.New("observer: malformed trajectory")
	// ErrEpisodeTooLong reports an episode with more steps than an
	// AddEpisode observer's MaxSequenceLength; the episode is dropped.
	ErrEpisodeTooLong = errors.New("observer: episode longer than the maximum sequence length")
	// ErrInsert reports items that could not be inserted into a table
	// (rate limiter timeout, canceled context, closed buffer, overwritten
	// steps). Items that failed only for lack of time stay pending and
	// are retried by the next Observe, Flush or Reset.
	ErrInsert = errors.New("observer: item insertion failed")
)
