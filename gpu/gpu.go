//go:build trajring_cuda

package gpu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"gorgonia.org/cu"
)

// Sentinel errors; every error a Backend returns wraps one of them.
var (
	// ErrBounds reports an index, offset or size outside an arena, or
	// arguments that do not fit together.
	ErrBounds = errors.New("gpu: out of bounds")
	// ErrArena reports an arena this backend did not allocate, or one
	// already freed.
	ErrArena = errors.New("gpu: foreign or freed arena")
	// ErrOutOfMemory reports that device (or pinned host) memory is
	// exhausted.
	ErrOutOfMemory = errors.New("gpu: out of device memory")
	// ErrDriver reports any other failure of the CUDA driver.
	ErrDriver = errors.New("gpu: CUDA driver error")
	// ErrClosed reports use of a closed Backend.
	ErrClosed = errors.New("gpu: backend closed")
	// ErrNoDevice reports that the CUDA driver cannot be used at all
	// (cuInit failed: no device, no permission, driver too old); New
	// returns it, and callers fall back to the cpu backend.
	ErrNoDevice = errors.New("gpu: no usable CUDA driver or device")
	// ErrDeviceLost reports a sticky device fault (illegal address,
	// launch failure, ECC error, ...): the context is unusable until the
	// process exits. The error also wraps ErrDriver and names the CUDA
	// result; once seen, every call of every Backend returns it.
	ErrDeviceLost = errors.New("gpu: device lost (sticky CUDA error)")

	// ErrCapturing is returned by calls from other goroutines while a
	// graph capture records the backend's stream (CaptureGraph): their
	// work would be captured into the graph instead of running. Free is
	// the exception (its memory is freed when the capture ends).
	ErrCapturing = errors.New("gpu: the backend's stream is capturing a graph on another goroutine")
)

// blockSize is the number of threads per block of every launch. A multiple
// of 32, so every kernel can use 32-lane groups per step.
const blockSize = 256

// stagingSlots is the number of pinned staging buffers used in turn, so
// the host can fill one while earlier copies are still in flight. Each is
// allocated on first use (at least 64 KiB pinned and 64 KiB on the
// device). 16, not 4: a caller that runs ahead of the device (a k-deep
// BatchSource and a writer on one backend) blocks in the fifth call with
// 4.
const stagingSlots = 16

// maxStagedUpload is the largest Upload copied through pinned staging;
// larger ones are copied on the stream straight from the caller's memory,
// which the driver stages itself.
const maxStagedUpload = 16 << 20

// Backend is the CUDA backend. It is safe for concurrent use.
type Backend struct {
	mu       sync.Mutex // serialises calls; guards everything below
	closed   bool
	launches atomic.Int64 // kernel launches issued (see Launches)
	d2h      atomic.Int64 // bytes copied device-to-host (see BytesToHost)
	d2hN     atomic.Int64 // device-to-host copies queued (see CopiesToHost)
	syncs    atomic.Int64 // host waits on the device (see Syncs)

	stream  cu.Stream
	args    *kernelArgs // C memory for launchKernel's arguments
	slots   [stagingSlots]slot
	next    int
	blocks  int       // grid-stride launches use at most this many blocks in x
	bound   bool      // the call in progress has bound the context (bindNow)
	restore ctxHandle // what bindNow replaced
	arenas  map[*Arena]struct{}
	pinned  []pinnedBlock // AllocPinned and AllocSource memory
	// capturing is set while CaptureGraph records the stream; arenas
	// freed meanwhile (a cleanup goroutine's frees, say) wait in
	// deferred until the capture ends, because the wait on the stream a
	// free makes would invalidate the capture.
	capturing bool
	deferred  []*Arena
	// closeAtEnd is set by a Close during a capture: the capture's end
	// (endCapture) frees what Close would have, once the stream is no
	// longer capturing (a wait on it now would fail, 900, and a free
	// meanwhile would race the capture's own calls).
	closeAtEnd bool
	captureTid int                 // the thread CaptureGraph records on (locked to its goroutine)
	graphs     map[*Graph]struct{} // live graphs, destroyed by Close

	// Scratch reused by every call so that the steady state of adding
	// and sampling allocates nothing.
	rings, outs   []*Arena
	nexts         []*Arena
	offs, padOffs []int64
	dma           []bool     // Scatter: the column's host source is AllocSource memory
	colCache      []colBlock // GatherWindowsAt's column descriptors (select.go; colCacheSize entries and the pinned ones)
	colTick       uint64
	groupScratch  []int64 // PatchItems' tree groups (select.go)
	groupOut      []int64
	src           sources // ScatterFrom's device sources (source.go)
}

// New starts a Backend on device 0: on first use in the process it
// retains the device's primary context and loads the kernels; every
// Backend gets its own non-blocking stream and staging buffers. It fails
// with an error wrapping ErrNoDevice when the driver cannot be used at
// all, ErrDeviceLost after a sticky fault, and ErrDriver otherwise.
func New() (*Backend, error) {
	if err := deviceLost(); err != nil {
		return nil, err
	}
	if err := initDriver(); err != nil {
		return nil, err
	}
	restore, err := bind()
	if err != nil {
		return nil, err
	}
	defer unbind(restore)
	b := &Backend{arenas: map[*Arena]struct{}{}, blocks: 16 * drv.sms}
	if err := b.init(); err != nil {
		_ = b.release()
		return nil, err
	}
	return b, nil
}

func (b *Backend) init() error {
	var err error
	b.args = newKernelArgs()
	if b.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return driverErr("cuStreamCreate", err)
	}
	for i := range b.slots {
		if b.slots[i].ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return driverErr("cuEventCreate", err)
		}
	}
	return nil
}

// release frees everything the backend holds except the process-wide
// context and modules. It runs with the context bound.
func (b *Backend) release() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if b.stream != (cu.Stream{}) {
		keep(b.syncStream())
	}
	for a := range b.arenas {
		keep(b.freeArena(a))
	}
	keep(b.freeDeferred())
	for g := range b.graphs {
		keep(b.destroyExecLocked(g.exec))
		g.exec = nil
	}
	b.graphs = nil
	for _, p := range b.pinned {
		keep(driverErr("cuMemFreeHost", cu.MemFreeHost(p.p)))
	}
	b.pinned = nil
	for i := range b.slots {
		keep(b.slots[i].free())
		if b.slots[i].ev != (cu.Event{}) {
			keep(driverErr("cuEventDestroy", cu.DestroyEvent(&b.slots[i].ev)))
		}
	}
	if b.stream != (cu.Stream{}) {
		keep(driverErr("cuStreamDestroy", b.stream.Destroy()))
		b.stream = cu.Stream{}
	}
	if b.args != nil {
		freeKernelArgs(b.args)
		b.args = nil
	}
	return first
}

// enter starts a call that uses the driver: it takes the backend's
// mutex, fails fast on a closed backend or a lost device, and binds the
// context to the calling thread. exit ends the call.
func (b *Backend) enter() error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	if err := b.bindNow(); err != nil {
		b.mu.Unlock()
		return err
	}
	return nil
}

// enterLaunch is enter without binding the context: for calls whose
// common case is kernel launches only (the draws, the gather of drawn
// windows, device priority updates). Each launch then binds and restores
// the context inside its one cgo call (launchKernel), two cgo calls fewer
// per call than bind and unbind around it: on a sample of about a
// microsecond of host time that is a third of it. A path that needs more
// of the driver calls bindNow first.
func (b *Backend) enterLaunch() error {
	if err := b.enterAny(); err != nil {
		return err
	}
	if b.capturing && unix.Gettid() != b.captureTid {
		b.mu.Unlock()
		return ErrCapturing
	}
	return nil
}

// enterAny is enterLaunch for a call that any goroutine may make during
// a capture (Free).
func (b *Backend) enterAny() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if err := deviceLost(); err != nil {
		b.mu.Unlock()
		return err
	}
	return nil
}

// bindNow binds the context for the rest of the call (see bind), once.
// It runs with the backend entered.
func (b *Backend) bindNow() error {
	if b.bound {
		return nil
	}
	r, err := bind()
	if err != nil {
		return err
	}
	b.restore, b.bound = r, true
	return nil
}

func (b *Backend) exit() {
	if b.bound {
		unbind(b.restore)
		b.restore, b.bound = ctxHandle{}, false
	}
	b.mu.Unlock()
}

// Name returns "gpu".
func (*Backend) Name() string { return "gpu" }

// Device returns the name of the device the backend runs on.
func (b *Backend) Device() string { return drv.devName }

// Sync waits until all work issued so far on the backend's stream has
// finished, and reports an error of any of it.
func (b *Backend) Sync() error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	return b.syncStream()
}

// Health reports whether the device is still usable, without waiting for
// queued work: nil, or an error wrapping ErrDeviceLost (a sticky fault,
// seen now or earlier by any Backend), ErrClosed or ErrDriver. It is
// safe for concurrent use.
func (b *Backend) Health() error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	if err := b.stream.Query(); err != nil && code(err) != int(cu.NotReady) {
		return driverErr("cuStreamQuery", err)
	}
	return nil
}

// Close waits for outstanding work, frees the arenas still allocated, the
// staging buffers and the stream. The primary context and the kernels
// stay loaded for the process (see New). Later calls return ErrClosed.
// During a graph capture (CaptureGraph) it returns nil at once and the
// capture's end frees everything, the capture failing with ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.closed = true
	if err := deviceLost(); err != nil {
		return err // nothing can be freed on a lost context
	}
	if b.capturing {
		b.closeAtEnd = true
		return nil
	}
	r, err := bind()
	if err != nil {
		return err
	}
	defer unbind(r)
	return b.release()
}

// driverErr wraps a driver error with the call that failed: out-of-memory
// results wrap ErrOutOfMemory, sticky faults ErrDeviceLost (and record it
// for every later call), all others ErrDriver. A nil error stays nil.
func driverErr(call string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, cu.OutOfMemory) {
		return fmt.Errorf("%w: %s: %w", ErrOutOfMemory, call, err)
	}
	if c := code(err); stickyCodes[c] {
		lostErr := fmt.Errorf("%w (%w): %s: CUDA error %d (%w)", ErrDeviceLost, ErrDriver, call, c, err)
		lost.CompareAndSwap(nil, &lostErr)
		return *lost.Load()
	}
	return fmt.Errorf("%w: %s: %w", ErrDriver, call, err)
}
