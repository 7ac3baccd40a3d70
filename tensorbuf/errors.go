package tensorbuf

import (
	"errors"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// Sentinel errors. Every error a tensorbuf call returns wraps one of these
// (test with errors.Is), and a call that fails changes nothing (see the
// package documentation for the one exception, a backend failure during a
// table sample).
var (
	ErrUnknownField = errors.New("tensorbuf: unknown field")
	ErrMissingField = errors.New("tensorbuf: missing field")
	ErrDType        = errors.New("tensorbuf: wrong dtype")
	ErrShape        = errors.New("tensorbuf: wrong shape")
	ErrRows         = errors.New("tensorbuf: wrong rows")
	ErrRowOwned     = errors.New("tensorbuf: row already owned by a writer")
	ErrConfig       = errors.New("tensorbuf: invalid configuration")
	ErrUnknownTable = errors.New("tensorbuf: unknown table")
	ErrTableExists  = errors.New("tensorbuf: table already exists")
	ErrInvalidArg   = errors.New("tensorbuf: invalid argument")
	ErrStepType     = errors.New("tensorbuf: step type contradicts the previous step's next step type")
	ErrSequenceLen  = errors.New("tensorbuf: sequence longer than capacity")
	ErrItem         = errors.New("tensorbuf: item outside the stored steps")
	ErrUnknownKey   = errors.New("tensorbuf: unknown item key")
	ErrEmpty        = errors.New("tensorbuf: not enough data to sample")
	ErrClosed       = errors.New("tensorbuf: use after Close")
	ErrBackend      = errors.New("tensorbuf: backend failure")
	ErrRateLimited  = errors.New("tensorbuf: rate limiter timed out")
	// ErrCorrupt: a checkpoint that is not whole and unaltered (the
	// checkpoint format package's own sentinel, so that its errors wrap it).
	ErrCorrupt = ckptio.ErrCorrupt
)
