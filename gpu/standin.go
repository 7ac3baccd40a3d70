//go:build trajring_cuda

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

static void (*standin_mode_fn)(int, int *, int *, unsigned long long *);
static int standin_mode_looked;

// trajring_standin_mode gets (set 0) or sets (set 1) the stand-in's launch
// mode, returning the previous one in place; 0 with a real driver.
static int trajring_standin_mode(int set, int *threads, int *chunk, unsigned long long *seed)
{
	if (!standin_mode_looked) {
		standin_mode_fn = (void (*)(int, int *, int *, unsigned long long *))dlsym(RTLD_DEFAULT, "trajring_standin_set_mode");
		standin_mode_looked = 1;
	}
	if (standin_mode_fn == NULL)
		return 0;
	standin_mode_fn(set, threads, chunk, seed);
	return 1;
}

static int (*standin_counts_fn)(unsigned long long *, int);
static int standin_counts_looked;

// trajring_standin_counts copies the stand-in's call counts into out (n of
// them at most) and returns how many it keeps; -1 with a real driver.
static int trajring_standin_counts(unsigned long long *out, int n)
{
	if (!standin_counts_looked) {
		standin_counts_fn = (int (*)(unsigned long long *, int))dlsym(RTLD_DEFAULT, "trajring_standin_counts");
		standin_counts_looked = 1;
	}
	return standin_counts_fn != NULL ? standin_counts_fn(out, n) : -1;
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

// StandinMode is how the stand-in driver runs the threads of a launch (see
// kernels/host/launch.h, and host.Mode in package kernels/host, which
// runs the same code).
//
// With Threads == 0 (the default) a launch runs its simulated threads in
// order on one host thread. With Threads >= 1 (race exposure) it cuts the
// grid into units of Chunk consecutive threads of one block, shuffles them
// (seeded by Seed and the launch's number since the mode was set) and runs
// them on Threads host threads at once, so a kernel whose threads race on
// memory without the tr_atomic_* helpers of kernels/host/kernels.h, or
// read what another thread of the same launch wrote, gives wrong or
// varying results in tests, as it would on a GPU. Threads == 1 only
// shuffles: reproducible order dependence.
//
// The stand-in reads its initial mode from TRAJRING_STANDIN_THREADS,
// TRAJRING_STANDIN_CHUNK and TRAJRING_STANDIN_SEED; `make test-cuda` runs
// the kernel-level tests a second time with TRAJRING_STANDIN_THREADS=4.
type StandinMode struct {
	Threads int    // host threads; 0: in order; at most 64
	Chunk   int    // simulated threads per unit (never spanning blocks); 0: 32, a warp
	Seed    uint64 // seed of the shuffle
}

// SetStandinMode sets the stand-in's mode for launches that run from now
// on (queued launches run at the next synchronisation) and returns the
// previous mode. Out-of-range values are clamped (Threads to [0, 64],
// Chunk < 1 to 32). ok is false, and nothing changes, with a real driver.
// It is a test hook, safe for concurrent use.
func SetStandinMode(m StandinMode) (prev StandinMode, ok bool) {
	t, c, s := C.int(m.Threads), C.int(m.Chunk), C.ulonglong(m.Seed)
	if C.trajring_standin_mode(1, &t, &c, &s) == 0 {
		return StandinMode{}, false
	}
	return StandinMode{Threads: int(t), Chunk: int(c), Seed: uint64(s)}, true
}

// CurrentStandinMode returns the stand-in's mode; ok is false with a real
// driver. It is safe for concurrent use.
func CurrentStandinMode() (m StandinMode, ok bool) {
	var t, c C.int
	var s C.ulonglong
	if C.trajring_standin_mode(0, &t, &c, &s) == 0 {
		return StandinMode{}, false
	}
	return StandinMode{Threads: int(t), Chunk: int(c), Seed: uint64(s)}, true
}

// StandinCounts counts the driver calls the stand-in driver has seen since
// the process started that a real driver makes every stream of the context
// wait for (allocations and frees of device and pinned memory) or that
// wait on the host: none should come from a steady state of adding,
// sampling or priority updates.
type StandinCounts struct {
	Allocs, Frees         uint64 // cuMemAlloc, cuMemFree
	HostAllocs, HostFrees uint64 // cuMemHostAlloc, cuMemFreeHost
	StreamSyncs           uint64 // cuStreamSynchronize
	EventSyncs            uint64 // cuEventSynchronize
	CtxSyncs              uint64 // cuCtxSynchronize
}

// CurrentStandinCounts returns the stand-in's counts; ok is false with a
// real driver. It is safe for concurrent use.
func CurrentStandinCounts() (c StandinCounts, ok bool) {
	var v [7]C.ulonglong
	if C.trajring_standin_counts(&v[0], C.int(len(v))) < 0 {
		return StandinCounts{}, false
	}
	return StandinCounts{uint64(v[0]), uint64(v[1]), uint64(v[2]), uint64(v[3]), uint64(v[4]), uint64(v[5]), uint64(v[6])}, true
}
