//go:build trajring_cuda

package gpu

/*
#cgo noescape trajring_launch
#cgo nocallback trajring_launch
#cgo nocallback trajring_bind
#include <cuda.h>
#include <stdlib.h>
int trajring_cu_init_result(void);

typedef struct {
	CUcontext prev; // the context to restore (possibly NULL) when changed
	int changed;
	CUresult res;
} trajring_bound;

// trajring_bind makes want current on the calling thread in one cgo call
// (values only, so nothing escapes to the Go heap).
static trajring_bound trajring_bind(CUcontext want)
{
	trajring_bound b = {NULL, 0, CUDA_SUCCESS};
	CUcontext cur = NULL;
	b.res = cuCtxGetCurrent(&cur);
	if (b.res != CUDA_SUCCESS || cur == want)
		return b;
	b.res = cuCtxSetCurrent(want);
	if (b.res == CUDA_SUCCESS) {
		b.prev = cur;
		b.changed = 1;
	}
	return b;
}

// trajring_launch launches f on s with its nargs 8-byte arguments in one
// cgo call (gorgonia.org/cu's Function.Launch makes five: two mallocs and
// two frees for the parameter arrays, then the launch). With want set it
// also makes want current for the launch and puts back what the thread
// had, as bind and unbind would around it.
static CUresult trajring_launch(CUcontext want, CUfunction f, unsigned gx, unsigned gy, unsigned bx, CUstream s,
		const unsigned long long *args, int nargs)
{
	unsigned long long v[16];
	void *p[16];
	CUcontext cur = NULL;
	CUresult r;
	int i;
	if (nargs > 16)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < nargs; i++) {
		v[i] = args[i];
		p[i] = &v[i];
	}
	if (want != NULL) {
		r = cuCtxGetCurrent(&cur);
		if (r != CUDA_SUCCESS)
			return r;
		if (cur != want && (r = cuCtxSetCurrent(want)) != CUDA_SUCCESS)
			return r;
	}
	r = cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, 0, s, p, NULL);
	if (want != NULL && cur != want)
		cuCtxSetCurrent(cur);
	return r;
}
*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// The process-wide driver state. The primary context of device 0 is
// retained once, by the first New, and never released: closing the last
// Backend keeps it (and the loaded modules) alive, so a later New neither
// re-creates the context nor re-JITs the kernels, and a thread left with
// the context current never holds a dangling context. This is what the
// CUDA runtime (cudart) does too.
var drv struct {
	once    sync.Once
	err     error
	dev     cu.Device
	ctx     cu.CUContext
	ctxC    C.CUcontext    // ctx as this package's cgo type
	fns     []C.CUfunction // by kernels.Kernel.ID
	sms     int
	devName string
}

// lost holds the first sticky device error (ErrDeviceLost): once set,
// every call of every Backend fails with it at once.
var lost atomic.Pointer[error]

// stickyCodes are the CUDA results after which the context is unusable
// until the process exits (CUDA driver API, "sticky errors").
var stickyCodes = map[int]bool{
	214: true, // CUDA_ERROR_ECC_UNCORRECTABLE
	700: true, // CUDA_ERROR_ILLEGAL_ADDRESS
	702: true, // CUDA_ERROR_LAUNCH_TIMEOUT
	710: true, // CUDA_ERROR_ASSERT (a device-side assert)
	714: true, // CUDA_ERROR_HARDWARE_STACK_ERROR
	715: true, // CUDA_ERROR_ILLEGAL_INSTRUCTION
	716: true, // CUDA_ERROR_MISALIGNED_ADDRESS
	717: true, // CUDA_ERROR_INVALID_ADDRESS_SPACE
	718: true, // CUDA_ERROR_INVALID_PC
	719: true, // CUDA_ERROR_LAUNCH_FAILED
	999: true, // CUDA_ERROR_UNKNOWN
}

// code returns the CUresult inside err (a cudaError, or a
// gorgonia.org/cu error, whose type is unexported), searching the whole
// tree of wrapped errors (driverErr wraps two), or -1.
func code(err error) int {
	if err == nil {
		return -1
	}
	if c, ok := err.(cudaError); ok {
		return int(c)
	}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Int && v.Type().PkgPath() == "gorgonia.org/cu" {
		return int(v.Int())
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return code(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if c := code(e); c >= 0 {
				return c
			}
		}
	}
	return -1
}

// deviceLost returns the sticky error recorded so far, or nil.
func deviceLost() error {
	if p := lost.Load(); p != nil {
		return *p
	}
	return nil
}

// initDriver sets up the process-wide state once.
func initDriver() error {
	drv.once.Do(func() { drv.err = setupDriver() })
	return drv.err
}

func setupDriver() error {
	if r := int(C.trajring_cu_init_result()); r != 0 {
		return fmt.Errorf("%w: cuInit: CUDA error %d (%v)", ErrNoDevice, r, cuResultName(r))
	}
	var err error
	if drv.dev, err = cu.GetDevice(0); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDevice, driverErr("cuDeviceGet", err))
	}
	if drv.ctx, err = drv.dev.RetainPrimaryCtx(); err != nil {
		return driverErr("cuDevicePrimaryCtxRetain", err)
	}
	drv.ctxC = *(*C.CUcontext)(unsafe.Pointer(&drv.ctx))
	prev, err := bind() // for the module loads below
	if err != nil {
		return err
	}
	defer unbind(prev)
	drv.fns = make([]C.CUfunction, len(kernels.All))
	for i, k := range kernels.All {
		if k.ID != i {
			return fmt.Errorf("%w: kernel %s has ID %d at index %d of kernels.All", ErrDriver, k.Entry, k.ID, i)
		}
		img, err := k.Image()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrDriver, err)
		}
		m, err := cu.LoadData(img)
		if err != nil {
			return driverErr("cuModuleLoadData("+k.Module+")", err)
		}
		fn, err := m.Function(k.Entry)
		if err != nil {
			return driverErr("cuModuleGetFunction("+k.Entry+")", err)
		}
		drv.fns[i] = *(*C.CUfunction)(unsafe.Pointer(&fn))
	}
	if drv.sms, err = drv.dev.Attribute(cu.MultiprocessorCount); err != nil || drv.sms < 1 {
		drv.sms = 1
	}
	if drv.devName, err = drv.dev.Name(); err != nil {
		drv.devName = "CUDA device 0"
	}
	return nil
}

// cuResultName names a CUresult the way gorgonia.org/cu does.
func cuResultName(r int) string {
	var s *C.char
	if C.cuGetErrorName(C.CUresult(r), &s) != C.CUDA_SUCCESS || s == nil {
		return "unknown"
	}
	return C.GoString(s)
}

// bind locks the calling goroutine to its thread and makes the primary
// context current on it. unbind puts back whatever the thread had current
// before (another context, or none) and unlocks it, so a call leaves no
// context behind on a thread it does not own: one cgo call to bind, one
// more to unbind only when bind changed the current context, and no
// goroutine hop.
func bind() (restore ctxHandle, err error) {
	runtime.LockOSThread()
	r := C.trajring_bind(drv.ctxC)
	if r.res != C.CUDA_SUCCESS {
		runtime.UnlockOSThread()
		return ctxHandle{}, driverErr("cuCtxSetCurrent", cudaError(r.res))
	}
	return ctxHandle{c: r.prev, changed: r.changed != 0}, nil
}

// unbind undoes bind.
func unbind(restore ctxHandle) {
	if restore.changed {
		C.cuCtxSetCurrent(restore.c)
	}
	runtime.UnlockOSThread()
}

// ctxHandle is the context bind replaced.
type ctxHandle struct {
	c       C.CUcontext
	changed bool
}

// cudaError is a CUresult returned by a direct cgo call.
type cudaError int

func (e cudaError) Error() string {
	return fmt.Sprintf("CUDA error %d (%s)", int(e), cuResultName(int(e)))
}

// maxKernelArgs is the most arguments launchKernel passes.
const maxKernelArgs = 16

// kernelArgs holds a launch's arguments in C memory, one array per
// Backend (used with its mutex held): a pointer to Go memory passed to C
// costs a cgocheck walk on every launch; one to C memory does not.
type kernelArgs = [maxKernelArgs]uint64

// newKernelArgs allocates a kernelArgs in C memory, freed by
// freeKernelArgs.
func newKernelArgs() *kernelArgs {
	return (*kernelArgs)(C.calloc(maxKernelArgs, 8))
}

func freeKernelArgs(a *kernelArgs) { C.free(unsafe.Pointer(a)) }

// launchKernel launches f over gx×gy blocks of bx threads on s with the
// first n of args (8 bytes each) as its parameters, in one cgo call.
// Unless bound (the caller bound the context with bind), the launch binds
// the primary context for itself.
func launchKernel(f C.CUfunction, gx, gy, bx int, s cu.Stream, args *kernelArgs, n int, bound bool) error {
	want := drv.ctxC
	if bound {
		want = nil
	}
	if r := C.trajring_launch(want, f, C.uint(gx), C.uint(gy), C.uint(bx), C.CUstream(unsafe.Pointer(s.C())),
		(*C.ulonglong)(unsafe.Pointer(args)), C.int(n)); r != C.CUDA_SUCCESS {
		return cudaError(r)
	}
	return nil
}
