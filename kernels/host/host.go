//go:build cgo

package host

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lpthread -lm
#include <stdlib.h>
#include "host.h"

static int tr_launch(const char *name, unsigned long long *args, int nargs, long long gx, long long gy, long long bx)
{
	void *params[16];
	int want, i;
	tr_host_fn fn = tr_host_lookup(name, &want);
	if (fn == NULL)
		return -1;
	if (want != nargs || nargs > 16)
		return -2;
	for (i = 0; i < nargs; i++)
		params[i] = &args[i];
	tr_host_launch(fn, params, gx, gy, bx);
	return 0;
}

static void tr_mode(int set, int *threads, int *chunk, unsigned long long *seed)
{
	int t = *threads, c = *chunk;
	tr_u64 s = *seed, os;
	tr_host_get_mode(threads, chunk, &os);
	*seed = os;
	if (set)
		tr_host_set_mode(t, c, s);
}

static void *tr_alloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 256, n == 0 ? 1 : n) != 0)
		return NULL;
	return p;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// ErrLaunch reports a launch the host build refuses: an unknown kernel, a
// wrong number of arguments or an empty grid.
var ErrLaunch = errors.New("host: bad launch")

// Mem is a block of C memory standing in for device memory: it is never
// moved by Go's garbage collector, so its address can be stored in kernel
// arguments and descriptors. Like cuMemAlloc, it is 256-byte aligned. A Mem
// is not safe for concurrent use.
type Mem struct {
	p unsafe.Pointer
	n int
}

// ErrNoMem reports a failed allocation.
var ErrNoMem = errors.New("host: out of memory")

// Alloc returns n bytes of C memory (contents undefined).
func Alloc(n int) (*Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrNoMem, n)
	}
	p := C.tr_alloc(C.size_t(n))
	if p == nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrNoMem, n)
	}
	return &Mem{p: p, n: n}, nil
}

// Bytes returns the memory as a slice, valid until Free.
func (m *Mem) Bytes() []byte { return unsafe.Slice((*byte)(m.p), m.n) }

// Addr returns the address of byte off, as a kernel argument carries it.
func (m *Mem) Addr(off int) uint64 { return uint64(uintptr(m.p)) + uint64(off) }

// Free releases the memory.
func (m *Mem) Free() {
	C.free(m.p)
	m.p, m.n = nil, 0
}

// Launch runs kernel k's host build on a grid of gx*gy blocks of bx
// threads with the given 8-byte arguments, as cuLaunchKernel would run its
// PTX, in the current Mode. It returns when every simulated thread has
// finished. It is safe for concurrent use on disjoint memory.
func Launch(k kernels.Kernel, gx, gy, bx int64, args ...uint64) error {
	if gx < 1 || gy < 1 || bx < 1 {
		return fmt.Errorf("%w: grid %dx%d of %d threads", ErrLaunch, gx, gy, bx)
	}
	if len(args) != k.Args {
		return fmt.Errorf("%w: %s takes %d arguments, got %d", ErrLaunch, k.Entry, k.Args, len(args))
	}
	name := C.CString(k.Entry)
	defer C.free(unsafe.Pointer(name))
	a := (*C.ulonglong)(C.malloc(C.size_t(8 * max(len(args), 1))))
	defer C.free(unsafe.Pointer(a))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(a)), len(args)), args)
	switch C.tr_launch(name, a, C.int(len(args)), C.longlong(gx), C.longlong(gy), C.longlong(bx)) {
	case -1:
		return fmt.Errorf("%w: no host build of %s", ErrLaunch, k.Entry)
	case -2:
		return fmt.Errorf("%w: %s: argument count", ErrLaunch, k.Entry)
	}
	return nil
}

// Mode says how Launch runs the simulated threads of a grid (see
// kernels/host/launch.h, which the stand-in driver shares).
//
// With Threads == 0 (the default) it runs them in order on the calling
// thread: for each blockIdx.y, every thread id in turn. With Threads >= 1
// (race exposure) it cuts the grid into units of Chunk consecutive threads
// of one block, shuffles them (seeded by Seed and the launch's number
// since the mode was set, so the same Mode repeats the same orders) and
// runs them on Threads host threads at once. Kernels whose threads race
// on memory without the tr_atomic_* helpers, or read what another thread
// of the same launch wrote, then give wrong or varying results, as on a
// GPU. Threads == 1 only shuffles: reproducible order dependence.
//
// The initial mode comes from the environment: TRAJRING_STANDIN_THREADS,
// TRAJRING_STANDIN_CHUNK and TRAJRING_STANDIN_SEED.
type Mode struct {
	Threads int    // host threads; 0: in order on the caller; at most 64
	Chunk   int    // simulated threads per unit (never spanning blocks); 0: 32, a warp
	Seed    uint64 // seed of the shuffle
}

// SetMode sets the mode of later launches and returns the previous one.
// Out-of-range values are clamped (Threads to [0, 64], Chunk < 1 to 32).
// It is safe for concurrent use; a launch already running keeps its mode.
func SetMode(m Mode) (prev Mode) {
	t, c, s := C.int(m.Threads), C.int(m.Chunk), C.ulonglong(m.Seed)
	C.tr_mode(1, &t, &c, &s)
	return Mode{Threads: int(t), Chunk: int(c), Seed: uint64(s)}
}

// CurrentMode returns the mode of later launches. It is safe for
// concurrent use.
func CurrentMode() Mode {
	var t, c C.int
	var s C.ulonglong
	C.tr_mode(0, &t, &c, &s)
	return Mode{Threads: int(t), Chunk: int(c), Seed: uint64(s)}
}

// lanes is the kernels' tr_lanes, for checking kernels.Lanes against it.
func lanes(words int64) int64 { return int64(C.tr_lanes(C.tr_i64(words))) }
