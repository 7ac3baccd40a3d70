package remote

import "errors"

// Sentinel errors of the package; test with errors.Is. Configuration errors
// also wrap tensorbuf.ErrConfig where they concern a buffer.
var (
	// ErrFrame reports bytes that are not a well-formed frame: a bad
	// magic, version, size or value.
	ErrFrame = errors.New("remote: malformed frame")
	// ErrSchema reports a frame whose fields differ from the buffer's.
	ErrSchema = errors.New("remote: frame of a foreign schema")
	// ErrConfig reports an invalid configuration.
	ErrConfig = errors.New("remote: invalid configuration")
	// ErrClosed reports a call after Close.
	ErrClosed = errors.New("remote: use after Close")
	// ErrNoRows reports an actor that does not fit in the buffer's free rows.
	ErrNoRows = errors.New("remote: no free rows for the actor")
	// ErrInsecure reports a server that would listen beyond loopback
	// without credentials.
	ErrInsecure = errors.New("remote: non-loopback listener without credentials")
)
