//go:build trajring_cuda

package gpu

/*
#cgo noescape trajring_graph_launch
#cgo nocallback trajring_graph_launch
#include <cuda.h>
#include <dlfcn.h>

// trajring_graph_launch launches x on s in one cgo call, making want
// current for it and putting back what the thread had (as
// trajring_launch does).
static CUresult trajring_graph_launch(CUcontext want, CUgraphExec x, CUstream s)
{
	CUcontext cur = NULL;
	CUresult r = cuCtxGetCurrent(&cur);
	if (r != CUDA_SUCCESS)
		return r;
	if (cur != want && (r = cuCtxSetCurrent(want)) != CUDA_SUCCESS)
		return r;
	r = cuGraphLaunch(x, s);
	if (cur != want)
		cuCtxSetCurrent(cur);
	return r;
}

// trajring_graph_capture begins (begin != 0) or ends a thread-local
// capture of s; ending it instantiates the graph into *x (NULL when the
// capture failed) and destroys the captured graph.
static CUresult trajring_graph_capture(CUstream s, int begin, CUgraphExec *x)
{
	CUgraph g = NULL;
	CUresult r;
	if (begin)
		return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
	*x = NULL;
	r = cuStreamEndCapture(s, &g);
	if (r != CUDA_SUCCESS)
		return r;
	r = cuGraphInstantiate(x, g, NULL, NULL, 0);
	cuGraphDestroy(g);
	return r;
}

// trajring_standin_graph_launches returns the stand-in driver's count of
// cuGraphLaunch calls, or -1 with a real driver.
static long long trajring_standin_graph_launches(void)
{
	int (*fn)(unsigned long long *, int) = (int (*)(unsigned long long *, int))dlsym(RTLD_DEFAULT, "trajring_standin_counts");
	unsigned long long c[8] = {0};
	if (fn == NULL || fn(c, 8) < 8)
		return -1;
	return (long long)c[7];
}

// trajring_standin_graph_state copies the stand-in driver's graph state
// (streams capturing, graphs, executable graphs and device allocations
// alive) into out and returns 0, or returns -1 with a real driver.
static int trajring_standin_graph_state(long long out[4])
{
	int (*fn)(long long *, int) = (int (*)(long long *, int))dlsym(RTLD_DEFAULT, "trajring_standin_graph_state");
	if (fn == NULL || fn(out, 4) < 4)
		return -1;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
	"gorgonia.org/cu"
)

// Graph is work captured from a Backend's stream (CaptureGraph) and
// instantiated as a CUDA graph, which Launch replays on that stream in
// one driver call: every kernel launch, copy and memset as captured, with
// the kernel parameters it had then (a per-step value must therefore live
// in device memory, written by a kernel of the graph or by a copy queued
// before the launch). A graph reads and writes the device addresses it
// was captured with: the memory must outlive it (a replay that reaches
// freed memory faults the device, as any illegal address does: the next
// wait returns ErrDeviceLost). A Graph is safe for concurrent use (its
// calls take the backend's mutex).
type Graph struct {
	b        *Backend
	exec     C.CUgraphExec // nil once closed
	nodes    int64         // kernel launches captured
	launches atomic.Int64
}

// CaptureGraph captures the work that record queues on the backend's
// stream (through the backend's own methods, on the calling goroutine)
// into a Graph, instead of running it: nothing record queues runs until
// the graph is launched. The capture is thread-local (the goroutine is
// locked to its thread meanwhile): a call that a capture cannot record
// (a host wait, an allocation, a copy to or from pageable memory, an
// event) fails, and then so does the capture, with an error wrapping
// ErrDriver, as do record's own errors (record's first error is
// returned). Other goroutines' calls on the backend fail meanwhile with
// ErrCapturing (their work would be captured too), except Free, safe from
// anywhere (the library's cleanups free dropped memory on their own
// goroutine): its memory is freed once the capture ends. The kernel launches captured are not
// counted by Launches (they are not issued); each Launch of the graph
// counts one.
//
// However record ends, the capture is over when CaptureGraph returns
// (endCapture) and no partial graph is left alive, because a capture
// left open keeps its stream, and the thread that began it, refusing
// the calls a capture forbids: also when record closed the backend (the
// error wraps ErrClosed; Close then leaves its frees to the capture's
// end) or a sticky fault was seen meanwhile (ErrDeviceLost).
func (b *Backend) CaptureGraph(record func() error) (*Graph, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.enter(); err != nil {
		return nil, err
	}
	s := C.CUstream(unsafe.Pointer(b.stream.C()))
	n0 := b.launches.Load()
	if r := C.trajring_graph_capture(s, 1, nil); r != C.CUDA_SUCCESS {
		// Leave capturing alone: a failed begin (another goroutine's
		// capture in progress, say) did not start one of ours.
		b.exit()
		return nil, driverErr("cuStreamBeginCapture", cudaError(r))
	}
	b.capturing, b.captureTid = true, unix.Gettid()
	b.exit()
	rerr := record()
	n := b.launches.Load() - n0
	b.launches.Add(-n)
	g, err := b.endCapture(s, n, rerr == nil)
	if rerr != nil {
		return nil, fmt.Errorf("gpu: graph capture: %w", rerr)
	}
	return g, err
}

// endCapture ends the capture CaptureGraph began on s, whatever record
// did meanwhile, and returns the instantiated graph of nodes kernel
// launches, tracked for Close, or nil with an error (keep false: record
// failed, and the graph is destroyed, nil returned). It runs on the
// thread that began the capture (a thread-local capture ends only there)
// and takes the backend's mutex without enter, which refuses a closed
// backend or a lost device: those are the cases that must still end the
// capture.
//
//   - Open: the capture ends, the graph is instantiated, and the arenas
//     freed during the capture are freed now.
//   - Lost (a sticky fault, seen by any backend): the end is still asked
//     for (the driver answers with the sticky error; what it does with its
//     capture state is its own, and nothing else can be done on a lost
//     context), any graph it returns is destroyed, and the error wraps
//     ErrDeviceLost.
//   - Closed during record: when Close destroyed the stream (b.stream is
//     zero), the capture ended with it and s must not be touched; when it
//     could not (the device was lost, or binding failed) the stream is
//     still there and its capture is ended as above. The error wraps
//     ErrClosed.
//
// Binding is safe in every case: the primary context is retained for the
// process (see drv) and never destroyed.
func (b *Backend) endCapture(s C.CUstream, nodes int64, keep bool) (*Graph, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capturing = false
	closedErr := fmt.Errorf("gpu: graph capture: the backend was closed during the capture: %w", ErrClosed)
	if b.closed && b.stream == (cu.Stream{}) {
		return nil, closedErr
	}
	restore, err := bind()
	if err != nil {
		return nil, fmt.Errorf("gpu: graph capture: the capture could not be ended: %w", err)
	}
	defer unbind(restore)
	var x C.CUgraphExec
	if r := C.trajring_graph_capture(s, 0, &x); r != C.CUDA_SUCCESS {
		err = driverErr("cuStreamEndCapture", cudaError(r))
	}
	lostErr := deviceLost()
	if x != nil && (err != nil || lostErr != nil || b.closed || !keep) {
		_ = b.destroyExecLocked(x)
		x = nil
	}
	if b.closed {
		if b.closeAtEnd && lostErr == nil {
			// Close ran during the capture and left its frees to now.
			b.closeAtEnd = false
			if err := b.release(); err != nil {
				return nil, fmt.Errorf("%w; freeing the backend after it: %w", closedErr, err)
			}
		}
		return nil, closedErr
	}
	if lostErr != nil { // nothing can be freed on a lost context (as Close)
		if err == nil {
			err = lostErr
		}
		return nil, err
	}
	_ = b.freeDeferred() // what other goroutines freed meanwhile (their Free returned nil)
	if err != nil || !keep {
		return nil, err
	}
	g := &Graph{b: b, exec: x, nodes: nodes}
	if b.graphs == nil {
		b.graphs = map[*Graph]struct{}{}
	}
	b.graphs[g] = struct{}{}
	return g, nil
}

// Launch queues the graph on its backend's stream after the work queued
// before it and returns without waiting: one driver call, counted as one
// launch by the backend's Launches. It fails with ErrClosed after Close.
func (g *Graph) Launch() error {
	b := g.b
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if g.exec == nil {
		return ErrClosed
	}
	want := drv.ctxC
	if b.bound {
		want = nil
	}
	var r C.CUresult
	if want == nil {
		r = C.cuGraphLaunch(g.exec, C.CUstream(unsafe.Pointer(b.stream.C())))
	} else {
		r = C.trajring_graph_launch(want, g.exec, C.CUstream(unsafe.Pointer(b.stream.C())))
	}
	if r != C.CUDA_SUCCESS {
		return driverErr("cuGraphLaunch", cudaError(r))
	}
	b.launches.Add(1)
	g.launches.Add(1)
	return nil
}

// Launches returns the number of times the graph was launched.
func (g *Graph) Launches() int64 { return g.launches.Load() }

// Kernels returns the number of kernel launches the graph replays.
func (g *Graph) Kernels() int64 { return g.nodes }

// Close destroys the graph (launches already queued still run, as the
// driver keeps what they need). It is idempotent; the backend's Close
// destroys the graphs still open.
func (g *Graph) Close() error {
	b := g.b
	b.mu.Lock()
	if g.exec == nil || b.closed {
		g.exec = nil
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	if err := b.enter(); err != nil {
		return err
	}
	defer b.exit()
	x := g.exec
	if x == nil { // Close destroyed it meanwhile
		return nil
	}
	g.exec = nil
	delete(b.graphs, g)
	return b.destroyExecLocked(x)
}

// destroyExecLocked destroys an executable graph; the caller holds the
// backend's mutex with the context bound.
func (b *Backend) destroyExecLocked(x C.CUgraphExec) error {
	if r := C.cuGraphExecDestroy(x); r != C.CUDA_SUCCESS {
		return driverErr("cuGraphExecDestroy", cudaError(r))
	}
	return nil
}

// StandinGraphLaunches returns the stand-in driver's count of graph
// launches (cuGraphLaunch calls) since the process started; ok is false
// with a real driver. It is safe for concurrent use.
func StandinGraphLaunches() (n int64, ok bool) {
	c := int64(C.trajring_standin_graph_launches())
	return c, c >= 0
}

// standinGraphState is the stand-in driver's graph state: the streams in
// a capture not yet ended, the graphs and executable graphs alive, and
// the device allocations alive.
type standinGraphState struct{ captures, graphs, execs, allocs int64 }

// standinGraphs returns the stand-in driver's graph state (it answers
// after a sticky fault too); ok is false with a real driver. It is safe
// for concurrent use.
func standinGraphs() (st standinGraphState, ok bool) {
	var v [4]C.longlong
	if C.trajring_standin_graph_state(&v[0]) != 0 {
		return st, false
	}
	return standinGraphState{int64(v[0]), int64(v[1]), int64(v[2]), int64(v[3])}, true
}
