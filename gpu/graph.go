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
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Graph is work captured from a Backend's stream (CaptureGraph) and
// instantiated as a CUDA graph, which Launch replays on that stream in
// one driver call: every kernel launch, copy and memset as captured, with
// the kernel parameters it had then (a per-step value must therefore live
// in device memory, written by a kernel of the graph or by a copy queued
// before the launch). A graph reads and writes the device addresses it
// was captured with: the memory must outlive it. A Graph is safe for
// concurrent use (its calls take the backend's mutex).
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
// returned). No other goroutine may use the backend during the capture:
// its work would be captured too; only Free is safe, from anywhere (the
// library's cleanups free dropped memory on their own goroutine): its
// memory is freed once the capture ends. The kernel launches captured are not
// counted by Launches (they are not issued); each Launch of the graph
// counts one.
func (b *Backend) CaptureGraph(record func() error) (*Graph, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.enter(); err != nil {
		return nil, err
	}
	s := C.CUstream(unsafe.Pointer(b.stream.C()))
	n0 := b.launches.Load()
	r := C.trajring_graph_capture(s, 1, nil)
	b.capturing = r == C.CUDA_SUCCESS
	b.exit()
	if r != C.CUDA_SUCCESS {
		return nil, driverErr("cuStreamBeginCapture", cudaError(r))
	}
	rerr := record()
	var x C.CUgraphExec
	err := b.enter()
	if err == nil {
		r = C.trajring_graph_capture(s, 0, &x)
		b.capturing = false
		_ = b.freeDeferred() // what other goroutines freed meanwhile (their Free returned nil)
		b.exit()
		if r != C.CUDA_SUCCESS {
			err = driverErr("cuStreamEndCapture", cudaError(r))
		}
	} else {
		b.mu.Lock() // closed (Close freed the deferred arenas) or lost
		b.capturing = false
		b.mu.Unlock()
	}
	n := b.launches.Load() - n0
	b.launches.Add(-n)
	if rerr != nil || err != nil {
		if x != nil {
			_ = b.destroyExec(x)
		}
		if rerr != nil {
			return nil, fmt.Errorf("gpu: graph capture: %w", rerr)
		}
		return nil, err
	}
	g := &Graph{b: b, exec: x, nodes: n}
	b.mu.Lock()
	if b.closed { // closed during the capture: Close could not see it
		if r, err := bind(); err == nil {
			_ = b.destroyExecLocked(x)
			unbind(r)
		}
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if b.graphs == nil {
		b.graphs = map[*Graph]struct{}{}
	}
	b.graphs[g] = struct{}{}
	b.mu.Unlock()
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

// destroyExec destroys an executable graph, entering the backend.
func (b *Backend) destroyExec(x C.CUgraphExec) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.exit()
	return b.destroyExecLocked(x)
}

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
