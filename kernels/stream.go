package kernels

// Event marks a point in a backend's work queue (a CUDA event recorded on
// the gpu backend's stream). Consumers on a device order their own work
// after it with cuStreamWaitEvent on Handle; host code waits with
// Synchronize.
type Event interface {
	// Handle returns the CUevent handle (0 for host backends, whose work
	// is done when their calls return).
	Handle() uintptr
	// Synchronize waits on the host until the work before the latest
	// record has finished.
	Synchronize() error
	// Done reports, without waiting, whether that work has finished.
	Done() (bool, error)
	// Close destroys the event.
	Close() error
}

// Streamer is implemented by backends whose work runs asynchronously on
// one stream (the gpu backend): it lets a consumer order its own device
// work against the backend's, in both directions, without a host Sync.
type Streamer interface {
	// Stream returns the backend's CUstream handle.
	Stream() uintptr
	// NewEvent returns an event for Record.
	NewEvent() (Event, error)
	// Record records e after all work issued so far on the stream.
	Record(e Event) error
	// WaitHandle makes all later work on the stream wait until the
	// latest record (issued so far) of the CUevent h has run, e.g. a
	// consumer's "done with this batch" event. h 0 is no wait.
	WaitHandle(h uintptr) error
}
