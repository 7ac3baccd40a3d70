//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
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
)

// blockSize is the number of threads per block of every launch. A multiple
// of 32, so every kernel can use 32-lane groups per step.
const blockSize = 256

// stagingSlots is the number of pinned staging buffers used in turn, so
// the host can fill one while earlier copies are still in flight.
const stagingSlots = 4

// maxStagedUpload is the largest Upload copied through pinned staging;
// larger ones are copied synchronously from the caller's memory.
const maxStagedUpload = 16 << 20

// Backend is the CUDA backend. It is safe for concurrent use.
type Backend struct {
	mu       sync.RWMutex // held for reading by calls, for writing by Close
	closed   bool
	reqs     chan *call
	launches atomic.Int64 // kernel launches issued (see Launches)

	// Owned by the worker goroutine.
	dev     cu.Device
	ctx     cu.CUContext
	stream  cu.Stream
	mods    []cu.Module
	fns     map[string]cu.Function
	slots   [stagingSlots]slot
	next    int
	blocks  int // grid-stride launches use at most this many blocks in x
	arenas  map[*Arena]struct{}
	devName string

	// Worker scratch, reused by every call so that the steady state of
	// adding and sampling allocates nothing.
	args          [8]uint64
	params        [8]unsafe.Pointer
	rings, outs   []*Arena
	nexts         []*Arena
	offs, padOffs []int64
}

// op names the work a call asks the worker to do.
type op int

const (
	opAlloc op = iota
	opFree
	opUpload
	opDownload
	opCopy
	opTensor
	opSync
	opScatter
	opGatherRows
	opConcat
	opGatherWindows
	opNStepReward
	opMemInfo
	opClose
)

// call is one request to the worker: its operation, arguments, results
// and the channel the worker signals when it is done. Calls are pooled, so
// a request allocates nothing.
type call struct {
	op                          op
	cols                        []kernels.Column
	src                         [][]byte
	idx, next                   []int64
	wins                        []kernels.Window
	a, a2                       kernels.Arena
	buf                         []byte
	n, off, off2, seqLen, capac int64
	gamma                       float64
	dt                          tensor.Dtype
	shape                       []int

	arena  *Arena
	tensor *tensor.Dense
	err    error
	done   chan struct{}
}

// calls is a free list of calls shared by all backends. Unlike a
// sync.Pool it never drops its contents (the race detector makes pools
// drop at random), so a steady state allocates nothing in any build.
var calls = make(chan *call, 256)

func newCall(o op) *call {
	var c *call
	select {
	case c = <-calls:
	default:
		c = &call{done: make(chan struct{}, 1)}
	}
	c.op = o
	return c
}

// New starts a Backend on device 0: it retains the device's primary
// context on a goroutine of its own, creates the stream and loads the
// kernels' PTX. It fails with an error wrapping ErrDriver when the driver
// or device cannot be used.
func New() (*Backend, error) {
	b := &Backend{reqs: make(chan *call), fns: map[string]cu.Function{}, arenas: map[*Arena]struct{}{}}
	for i := range b.params {
		b.params[i] = unsafe.Pointer(&b.args[i])
	}
	started := make(chan error)
	go b.serve(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return b, nil
}

// serve is the worker: it owns the OS thread and the context, and runs
// requests one at a time until Close.
func (b *Backend) serve(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.init(); err != nil {
		b.release()
		started <- err
		return
	}
	started <- nil
	for c := range b.reqs {
		c.err = b.exec(c)
		c.done <- struct{}{}
	}
}

// exec runs one call on the worker.
func (b *Backend) exec(c *call) error {
	switch c.op {
	case opAlloc:
		return b.alloc(c)
	case opFree:
		return b.free(c.a)
	case opUpload:
		return b.upload(c.a, c.off, c.buf)
	case opDownload:
		return b.download(c.buf, c.a, c.off)
	case opCopy:
		return b.copyDtoD(c.a, c.off, c.a2, c.off2, c.n)
	case opTensor:
		return b.tensorOf(c)
	case opSync:
		return driverErr("cuStreamSynchronize", b.stream.Synchronize())
	case opScatter:
		return b.scatter(c.cols, c.src, c.idx)
	case opGatherRows:
		return b.gatherRows(c.cols, c.idx)
	case opConcat:
		return b.concat(c.cols, c.idx, c.next)
	case opGatherWindows:
		return b.gatherWindows(c.cols, c.wins, c.seqLen, c.capac, c.a, c.off)
	case opNStepReward:
		return b.nstepReward(c.a, c.a2, c.off, c.wins, c.capac, c.gamma)
	case opMemInfo:
		return b.memInfo(c)
	case opClose:
		return b.release()
	}
	return fmt.Errorf("%w: unknown request %d", ErrDriver, c.op)
}

func (b *Backend) init() error {
	var err error
	if b.dev, err = cu.GetDevice(0); err != nil {
		return driverErr("cuDeviceGet", err)
	}
	if b.ctx, err = b.dev.RetainPrimaryCtx(); err != nil {
		return driverErr("cuDevicePrimaryCtxRetain", err)
	}
	if err = cu.SetCurrentContext(b.ctx); err != nil {
		return driverErr("cuCtxSetCurrent", err)
	}
	if b.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return driverErr("cuStreamCreate", err)
	}
	for _, k := range kernels.All {
		ptx, err := k.PTX()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrDriver, err)
		}
		m, err := cu.LoadData(ptx)
		if err != nil {
			return driverErr("cuModuleLoadData("+k.Module+")", err)
		}
		b.mods = append(b.mods, m)
		fn, err := m.Function(k.Entry)
		if err != nil {
			return driverErr("cuModuleGetFunction("+k.Entry+")", err)
		}
		b.fns[k.Entry] = fn
	}
	sms, err := b.dev.Attribute(cu.MultiprocessorCount)
	if err != nil || sms < 1 {
		sms = 1
	}
	b.blocks = 16 * sms // a few waves of resident blocks; loops stride over the rest
	if b.devName, err = b.dev.Name(); err != nil {
		b.devName = "CUDA device 0"
	}
	for i := range b.slots {
		if b.slots[i].ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return driverErr("cuEventCreate", err)
		}
	}
	return nil
}

// release frees everything the worker holds; it runs on the worker.
func (b *Backend) release() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if b.stream != (cu.Stream{}) {
		keep(driverErr("cuStreamSynchronize", b.stream.Synchronize()))
	}
	for a := range b.arenas {
		keep(b.freeArena(a))
	}
	for i := range b.slots {
		keep(b.slots[i].free())
		if b.slots[i].ev != (cu.Event{}) {
			keep(driverErr("cuEventDestroy", cu.DestroyEvent(&b.slots[i].ev)))
		}
	}
	for _, m := range b.mods {
		keep(driverErr("cuModuleUnload", m.Unload()))
	}
	b.mods = nil
	if b.stream != (cu.Stream{}) {
		keep(driverErr("cuStreamDestroy", b.stream.Destroy()))
	}
	if b.ctx != (cu.CUContext{}) {
		keep(driverErr("cuDevicePrimaryCtxRelease", b.dev.ReleasePrimaryCtx()))
		b.ctx = cu.CUContext{}
	}
	return first
}

// do runs c on the worker goroutine and returns its error. The caller
// reads any other results from c and then calls c.put.
func (b *Backend) do(c *call) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	b.reqs <- c
	<-c.done
	return c.err
}

// put clears a finished call and returns it to the pool.
func (c *call) put() {
	done := c.done
	*c = call{done: done}
	select {
	case calls <- c:
	default:
	}
}

// run is do for calls with no result but the error.
func (b *Backend) run(c *call) error {
	err := b.do(c)
	c.put()
	return err
}

// Name returns "gpu".
func (*Backend) Name() string { return "gpu" }

// Device returns the name of the device the backend runs on.
func (b *Backend) Device() string { return b.devName }

// Sync waits until all work issued so far has finished, and reports an
// error of any of it.
func (b *Backend) Sync() error { return b.run(newCall(opSync)) }

// Close waits for outstanding work, frees the arenas still allocated, the
// staging buffers, stream and modules, and releases the context. Later
// calls return ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	c := newCall(opClose)
	b.reqs <- c
	<-c.done
	err := c.err
	c.put()
	b.closed = true
	close(b.reqs)
	return err
}

// driverErr wraps a driver error with the call that failed: out-of-memory
// results wrap ErrOutOfMemory, all others ErrDriver. A nil error stays nil.
func driverErr(call string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, cu.OutOfMemory) {
		return fmt.Errorf("%w: %s: %v", ErrOutOfMemory, call, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrDriver, call, err)
}
