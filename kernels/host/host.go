//go:build cgo

package host

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lm
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
	fn(params, gx, gy, bx);
	return 0;
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
// PTX. It returns when every simulated thread has finished.
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

// lanes is the kernels' tr_lanes, for checking kernels.Lanes against it.
func lanes(words int64) int64 { return int64(C.tr_lanes(C.tr_i64(words))) }
