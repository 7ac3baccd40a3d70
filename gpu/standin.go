//go:build cuda

package gpu

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>

static unsigned long long (*standin_ns_fn)(void);
static int standin_ns_looked;

// trajring_standin_ns returns the stand-in's device time, or ~0 with a
// real driver.
static unsigned long long trajring_standin_ns(void)
{
	if (!standin_ns_looked) {
		standin_ns_fn = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "trajring_standin_device_ns");
		standin_ns_looked = 1;
	}
	return standin_ns_fn != NULL ? standin_ns_fn() : ~0ULL;
}
*/
import "C"

import "time"

// StandinDeviceTime returns the CPU time the stand-in driver (gpu/standin,
// used where there is no GPU) has spent running device work: queued
// kernels and copies and synchronous copies, which on a GPU run on the
// device while the host goes on. Benchmarks subtract it from the calling
// thread's CPU time to report the host time of calls. ok is false with a real driver. It is
// safe for concurrent use.
func StandinDeviceTime() (d time.Duration, ok bool) {
	ns := C.trajring_standin_ns()
	if ns == ^C.ulonglong(0) {
		return 0, false
	}
	return time.Duration(ns), true
}
