/*
 * standin.c: a stand-in for the CUDA driver library (libcuda.so.1) that
 * runs on host memory, so that cuda builds of trajring (package gpu and
 * everything above it) run their tests on machines without a GPU.
 *
 * It implements the driver calls that package gpu and gorgonia.org/cu's
 * initialisation make: init, device queries, the primary context, device
 * and pinned host memory, copies and memsets, streams, events, modules
 * loaded from PTX text, and kernel launches. A launch runs the host build
 * of our kernels (kernels/host/host.h), found by entry name. Asynchronous
 * work really is asynchronous: it runs at the next synchronisation point
 * (see "the work queue" below), so missing synchronisation shows up in
 * tests. Every other driver entry point is a weak stub from gen-stubs.sh
 * answering CUDA_ERROR_NOT_SUPPORTED.
 *
 * It checks what a real driver checks and tests would otherwise miss:
 * a current context on the calling thread, device ranges of copies and
 * memsets inside one allocation, frees of unknown pointers, launch
 * dimensions, argument counts against the PTX entry, 8-byte (.u64/.b64)
 * kernel parameters, and a device memory limit (TRAJRING_STANDIN_MEM
 * bytes, default 4 GiB) past which allocations fail with
 * CUDA_ERROR_OUT_OF_MEMORY. Fresh device memory is filled with 0xCD, as
 * real device memory is not zeroed.
 *
 * Device memory is unreadable from host code (PROT_NONE) except while the
 * stand-in itself copies, sets or runs kernels on it (dev_enter/dev_leave),
 * so a host dereference of a device pointer (a device tensor's Data, say)
 * faults in tests as it does on a GPU. TRAJRING_STANDIN_PROTECT=0 turns
 * that off.
 *
 * Test hooks: TRAJRING_STANDIN_NODEVICE=1 makes cuInit fail with
 * CUDA_ERROR_NO_DEVICE (a machine without a usable GPU);
 * TRAJRING_STANDIN_FAULT_LAUNCH=N makes the N-th kernel launch that runs
 * fault with CUDA_ERROR_ILLEGAL_ADDRESS, a sticky error: the rest of the
 * queue is dropped and every later call returns it, as on a GPU.
 * trajring_standin_device_ns() returns the time spent running queued work
 * and synchronous copies (the "device" time), so benchmarks can report
 * the host time of calls as a GPU would see it.
 *
 * Race exposure: TRAJRING_STANDIN_THREADS=N (1..64) runs each launch's
 * blocks, cut into units of TRAJRING_STANDIN_CHUNK threads (default 32),
 * in a shuffled order (TRAJRING_STANDIN_SEED, default 1) on N host threads
 * at once instead of one thread after another (kernels/host/launch.h), so
 * kernels whose threads race or depend on each other's order within a
 * launch fail in tests; trajring_standin_set_mode changes it at run time
 * (gpu.SetStandinMode). The device time then counts only the share of the
 * thread that flushes the queue.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>

#include <cuda.h>

#include "host.h"

#define STANDIN_VERSION 11080

struct CUctx_st {
	int refs;
};

struct CUstream_st {
	unsigned flags;
	unsigned long seq; /* creation order; the NULL stream is 0 */
};

struct CUevent_st {
	double ms;
	int pending;          /* records queued, not yet run */
	unsigned long issued; /* records issued */
	unsigned long done;   /* the latest record that has run */
};

#define MAX_ENTRIES 64

struct CUmod_st {
	int n;
	char names[MAX_ENTRIES][128];
	int params[MAX_ENTRIES]; /* number of parameters; -1 if one is not 8 bytes */
};

struct CUfunc_st {
	tr_host_fn fn;
	int nargs;
	char name[128];
};

static struct CUctx_st primary;
static __thread CUcontext current;
static int initialized;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct alloc {
	uintptr_t base;
	size_t size;
	void *map;     /* the mapping holding it, ending in a PROT_NONE guard page */
	size_t maplen;
};

static struct alloc *allocs;
static size_t nallocs, capallocs;
static size_t used;
static void **hosts;
static size_t nhosts, caphosts;

static size_t mem_limit(void)
{
	const char *s = getenv("TRAJRING_STANDIN_MEM");
	if (s != NULL && *s != 0)
		return (size_t)strtoull(s, NULL, 10);
	return (size_t)4 << 30;
}

/* sticky is the sticky error of the context (0: none), set by an
   injected kernel fault (TRAJRING_STANDIN_FAULT_LAUNCH). */
static volatile CUresult sticky;
static long fault_launch; /* the launch that faults; 0: none */
static long launches_run;
static int protect = 1;   /* device memory PROT_NONE outside the stand-in */
static unsigned long long device_ns;
static unsigned long stream_seq;

static CUresult need_ctx(void)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (current == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (sticky != CUDA_SUCCESS)
		return sticky;
	return CUDA_SUCCESS;
}

/* ---- device memory protection ----
 * devmu (recursive) is held while the stand-in touches device memory;
 * the first dev_enter makes every allocation readable and writable, the
 * last dev_leave makes them PROT_NONE again. Lock order: qmu, devmu, mu. */
static pthread_mutex_t devmu;
static pthread_once_t devmu_once = PTHREAD_ONCE_INIT;
static int devdepth;
static struct timespec devstart;

static void devmu_init(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&devmu, &a);
}

static void set_prot(int prot);

static void dev_enter(void)
{
	pthread_once(&devmu_once, devmu_init);
	pthread_mutex_lock(&devmu);
	if (devdepth++ == 0) {
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &devstart);
		set_prot(PROT_READ | PROT_WRITE);
	}
}

static void dev_leave(void)
{
	struct timespec t;
	if (--devdepth == 0) {
		set_prot(PROT_NONE);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		device_ns += (unsigned long long)((t.tv_sec - devstart.tv_sec) * 1000000000LL + (t.tv_nsec - devstart.tv_nsec));
	}
	pthread_mutex_unlock(&devmu);
}

/* dev_open makes [p, p+n) of one device allocation accessible, for a
   synchronous copy or memset: cheaper than dev_enter, which opens every
   allocation. dev_close undoes it. */
static void dev_span(uintptr_t p, size_t n, uintptr_t *lo, size_t *len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	*lo = p & ~(page - 1);
	*len = (size_t)(((p + n + page - 1) & ~(page - 1)) - *lo);
}

static void dev_open(CUdeviceptr p, size_t n)
{
	uintptr_t lo;
	size_t len;
	pthread_once(&devmu_once, devmu_init);
	pthread_mutex_lock(&devmu);
	if (devdepth++ == 0) {
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &devstart);
		if (protect) {
			dev_span((uintptr_t)p, n, &lo, &len);
			mprotect((void *)lo, len, PROT_READ | PROT_WRITE);
		}
	}
}

static void dev_close(CUdeviceptr p, size_t n)
{
	uintptr_t lo;
	size_t len;
	struct timespec t;
	if (--devdepth == 0) {
		if (protect) {
			dev_span((uintptr_t)p, n, &lo, &len);
			mprotect((void *)lo, len, PROT_NONE);
		}
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		device_ns += (unsigned long long)((t.tv_sec - devstart.tv_sec) * 1000000000LL + (t.tv_nsec - devstart.tv_nsec));
	}
	pthread_mutex_unlock(&devmu);
}

/* trajring_standin_device_ns returns the CPU time (of the threads that
   ran it, in nanoseconds) spent running device work: queued work,
   synchronous copies and memsets, and the protection changes. */
unsigned long long trajring_standin_device_ns(void)
{
	unsigned long long v;
	pthread_once(&devmu_once, devmu_init);
	pthread_mutex_lock(&devmu);
	v = device_ns;
	pthread_mutex_unlock(&devmu);
	return v;
}

/* trajring_standin_set_mode sets the launch mode of later launches
   (kernels/host/launch.h: threads 0 in order, 1..64 race exposure; chunk
   < 1: 32) when set is nonzero, and returns the mode before in *threads,
   *chunk and *seed. A launch already running keeps its mode. */
void trajring_standin_set_mode(int set, int *threads, int *chunk, unsigned long long *seed)
{
	int t = *threads, c = *chunk;
	tr_u64 s = *seed, os;
	tr_host_get_mode(threads, chunk, &os);
	*seed = os;
	if (set)
		tr_host_set_mode(t, c, s);
}

/* dev_range reports whether [p, p+n) lies inside one device allocation. */
static int dev_range(CUdeviceptr p, size_t n)
{
	size_t i;
	int ok = 0;
	pthread_mutex_lock(&mu);
	for (i = 0; i < nallocs; i++) {
		if (p >= allocs[i].base && p - allocs[i].base <= allocs[i].size &&
		    n <= allocs[i].size - (p - allocs[i].base)) {
			ok = 1;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

/* set_prot sets the protection of every device allocation (not its guard
   page); it runs under devmu. */
static void set_prot(int prot)
{
	size_t i, page;
	if (!protect)
		return;
	page = (size_t)sysconf(_SC_PAGESIZE);
	pthread_mutex_lock(&mu);
	for (i = 0; i < nallocs; i++)
		mprotect(allocs[i].map, allocs[i].maplen - page, prot);
	pthread_mutex_unlock(&mu);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * ---- the work queue ----
 *
 * Asynchronous work (the *Async copies and memsets, event records and
 * kernel launches) is not run when it is issued, as a real device would
 * not run it then either: it is queued, in issue order, and run at the
 * next synchronisation point (stream, event or context synchronize, a
 * synchronous copy or memset, a free). A host buffer handed to an async
 * copy is therefore read or written late, and device memory written by a
 * kernel changes only later, so a caller that reuses staging memory too
 * early or reads results without synchronising sees wrong bytes in tests,
 * as it would on a GPU. One FIFO serves all streams: a valid order for
 * any program that synchronises correctly.
 */
enum { Q_H2D, Q_D2H, Q_D2D, Q_MEMSET, Q_EVENT, Q_LAUNCH, Q_WAIT, Q_DONE };

#define MAX_ARGS 16

struct qop {
	int kind;
	CUdeviceptr dst, src;
	const void *hsrc;
	void *hdst;
	size_t n;
	unsigned char v;
	struct CUevent_st *ev;
	tr_host_fn fn;
	unsigned gx, gy, bx;
	int nargs;
	tr_u64 args[MAX_ARGS];
	CUstream stream;      /* the stream it was issued on (NULL: legacy) */
	unsigned long target; /* Q_EVENT: the record; Q_WAIT: the record awaited */
};

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static struct qop *queue;
static size_t qlen, qcap;

/* reserve makes room for one more element in a growable array *arr of
   *len elements of size bytes (capacity *cap, first growth to first);
   it returns 0, or -1 when memory runs out and the array is unchanged. */
static int reserve(void **arr, size_t len, size_t *cap, size_t size, size_t first)
{
	size_t c;
	void *a;
	if (len < *cap)
		return 0;
	c = *cap ? 2 * *cap : first;
	a = realloc(*arr, c * size);
	if (a == NULL)
		return -1;
	*arr = a;
	*cap = c;
	return 0;
}

static CUresult enqueue(const struct qop *op)
{
	pthread_mutex_lock(&qmu);
	if (reserve((void **)&queue, qlen, &qcap, sizeof *queue, 256) != 0) {
		pthread_mutex_unlock(&qmu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	queue[qlen++] = *op;
	pthread_mutex_unlock(&qmu);
	return CUDA_SUCCESS;
}

static void run_op(struct qop *op)
{
	void *params[MAX_ARGS];
	int i;
	switch (op->kind) {
	case Q_H2D:
		memcpy((void *)(uintptr_t)op->dst, op->hsrc, op->n);
		break;
	case Q_D2H:
		memcpy(op->hdst, (const void *)(uintptr_t)op->src, op->n);
		break;
	case Q_D2D:
		memmove((void *)(uintptr_t)op->dst, (const void *)(uintptr_t)op->src, op->n);
		break;
	case Q_MEMSET:
		memset((void *)(uintptr_t)op->dst, op->v, op->n);
		break;
	case Q_EVENT:
		op->ev->ms = now_ms();
		op->ev->pending--;
		if (op->target > op->ev->done)
			op->ev->done = op->target;
		break;
	case Q_LAUNCH:
		if (fault_launch > 0 && ++launches_run == fault_launch) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			break;
		}
		for (i = 0; i < op->nargs; i++)
			params[i] = &op->args[i];
		tr_host_launch(op->fn, params, op->gx, op->gy, op->bx);
		break;
	}
}

static unsigned long stream_of(const struct qop *op)
{
	return op->stream == NULL ? 0 : op->stream->seq;
}

static int runnable(const struct qop *op)
{
	return op->kind != Q_WAIT || op->ev->done >= op->target;
}

/*
 * flush runs all queued work; every synchronisation point calls it.
 * Each stream's work runs in issue order, and a cuStreamWaitEvent holds
 * its stream until the awaited record has run, but streams are otherwise
 * interleaved adversarially: the newest stream with runnable work runs
 * until it blocks, then the next. A consumer stream that reads a batch
 * without waiting for the producer's event reads it before it is written,
 * and a producer that does not wait for the consumer's "done" event
 * overwrites the batch before the consumer reads it: both show in tests.
 * After a sticky fault the rest of the queue is dropped.
 */
static CUresult flush(void)
{
	size_t i, left;
	pthread_mutex_lock(&qmu);
	if (qlen == 0) { /* nothing queued: device memory untouched */
		pthread_mutex_unlock(&qmu);
		return sticky;
	}
	dev_enter();
	left = qlen;
	while (left > 0 && sticky == CUDA_SUCCESS) {
		size_t pick = qlen;
		unsigned long best = 0;
		int found = 0;
		unsigned long seen[64];
		int nseen = 0, k;
		/* the first pending op of every stream: pick the newest runnable */
		for (i = 0; i < qlen; i++) {
			unsigned long sq;
			int dup = 0;
			if (queue[i].kind == Q_DONE)
				continue;
			sq = stream_of(&queue[i]);
			for (k = 0; k < nseen; k++)
				dup |= seen[k] == sq;
			if (dup)
				continue;
			if (nseen < 64)
				seen[nseen++] = sq;
			if (runnable(&queue[i]) && (!found || sq > best)) {
				found = 1;
				best = sq;
				pick = i;
			}
		}
		if (!found) { /* every stream waits: an event never recorded runs */
			fprintf(stderr, "trajring stand-in: streams wait on each other; running in issue order\n");
			for (i = 0; i < qlen; i++)
				if (queue[i].kind != Q_DONE)
					break;
			queue[i].kind = Q_DONE; /* the first pending op is a wait */
			left--;
			continue;
		}
		/* run the picked stream until it blocks */
		for (i = pick; i < qlen && sticky == CUDA_SUCCESS; i++) {
			if (queue[i].kind == Q_DONE || stream_of(&queue[i]) != best)
				continue;
			if (!runnable(&queue[i]))
				break;
			run_op(&queue[i]);
			queue[i].kind = Q_DONE;
			left--;
		}
	}
	for (i = 0; i < qlen; i++) /* dropped after a fault: settle events */
		if (queue[i].kind == Q_EVENT)
			queue[i].ev->pending--;
	qlen = 0;
	dev_leave();
	pthread_mutex_unlock(&qmu);
	return sticky;
}

/* ---- init, version, devices ---- */

CUresult cuInit(unsigned int flags)
{
	const char *s;
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	s = getenv("TRAJRING_STANDIN_NODEVICE");
	if (s != NULL && strcmp(s, "1") == 0)
		return CUDA_ERROR_NO_DEVICE;
	s = getenv("TRAJRING_STANDIN_FAULT_LAUNCH");
	if (s != NULL && *s != 0)
		fault_launch = strtol(s, NULL, 10);
	s = getenv("TRAJRING_STANDIN_PROTECT");
	if (s != NULL && strcmp(s, "0") == 0)
		protect = 0;
	initialized = 1;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
	if (v == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*v = STANDIN_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (n == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*n = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (d == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	const char *s = "trajring stand-in driver (host memory)";
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (name == NULL || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", s);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (bytes == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = mem_limit();
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (v == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*v = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*v = 2;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		*v = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		*v = 64;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		*v = 2147483647;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		*v = 65535;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		*v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		*v = 1;
		break;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

/* ---- contexts: one primary context ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (c == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	primary.refs++;
	pthread_mutex_unlock(&mu);
	*c = &primary;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	if (primary.refs > 0)
		primary.refs--;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *c, unsigned int flags, CUdevice d)
{
	CUresult r = cuDevicePrimaryCtxRetain(c, d);
	if (r == CUDA_SUCCESS)
		current = *c;
	return r;
}

CUresult cuCtxDestroy(CUcontext c)
{
	if (c != &primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (current == c)
		current = NULL;
	return cuDevicePrimaryCtxRelease(0);
}

CUresult cuCtxSetCurrent(CUcontext c)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (c != NULL && c != &primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	current = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c)
{
	if (c == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*c = current;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c)
{
	return cuCtxSetCurrent(c);
}

CUresult cuCtxPopCurrent(CUcontext *c)
{
	if (c != NULL)
		*c = current;
	current = NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *d)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	*d = 0;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	CUresult r = need_ctx();
	if (r == CUDA_SUCCESS)
		r = flush();
	return r;
}

/* ---- device memory ---- */

CUresult cuMemGetInfo(size_t *free_, size_t *total)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mu);
	if (free_ != NULL)
		*free_ = mem_limit() - used;
	if (total != NULL)
		*total = mem_limit();
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t n)
{
	void *m = NULL;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL || n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (n > mem_limit() - used) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (reserve((void **)&allocs, nallocs, &capallocs, sizeof *allocs, 64) != 0) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* The allocation ends (after rounding to 256 bytes, the alignment the
	   driver guarantees) right before a PROT_NONE page: a kernel that runs
	   past an arena faults in tests instead of corrupting the heap. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t rounded = (n + 255) & ~(size_t)255;
	size_t data = (rounded + page - 1) / page * page;
	void *map = mmap(NULL, data + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (mprotect((char *)map + data, page, PROT_NONE) != 0) {
		munmap(map, data + page);
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m = (char *)map + (data - rounded);
	allocs[nallocs].base = (uintptr_t)m;
	allocs[nallocs].size = n;
	allocs[nallocs].map = map;
	allocs[nallocs].maplen = data + page;
	nallocs++;
	used += n;
	pthread_mutex_unlock(&mu);
	dev_open((CUdeviceptr)(uintptr_t)m, n);
	memset(m, 0xCD, n);
	dev_close((CUdeviceptr)(uintptr_t)m, n);
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p)
{
	size_t i;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (p == 0)
		return CUDA_SUCCESS;
	flush(); /* queued work may still use the memory */
	pthread_mutex_lock(&mu);
	for (i = 0; i < nallocs; i++) {
		if (allocs[i].base == p) {
			void *map = allocs[i].map;
			size_t maplen = allocs[i].maplen;
			used -= allocs[i].size;
			allocs[i] = allocs[--nallocs];
			pthread_mutex_unlock(&mu);
			munmap(map, maplen);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	size_t i;
	pthread_mutex_lock(&mu);
	for (i = 0; i < nallocs; i++) {
		if (p >= allocs[i].base && p - allocs[i].base < allocs[i].size) {
			if (base != NULL)
				*base = allocs[i].base;
			if (size != NULL)
				*size = allocs[i].size;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_NOT_FOUND;
}

/* ---- pinned host memory ---- */

CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
	void *m = NULL;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (posix_memalign(&m, 4096, n ? n : 1) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	if (reserve((void **)&hosts, nhosts, &caphosts, sizeof *hosts, 64) != 0) {
		pthread_mutex_unlock(&mu);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	hosts[nhosts++] = m;
	pthread_mutex_unlock(&mu);
	*p = m;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **p, size_t n)
{
	return cuMemHostAlloc(p, n, 0);
}

CUresult cuMemFreeHost(void *p)
{
	size_t i;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	flush(); /* queued copies may still use the memory */
	pthread_mutex_lock(&mu);
	for (i = 0; i < nhosts; i++) {
		if (hosts[i] == p) {
			hosts[i] = hosts[--nhosts];
			pthread_mutex_unlock(&mu);
			free(p);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- copies and memsets: async ones complete before returning ---- */

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = flush()) != CUDA_SUCCESS) /* synchronous: waits for all queued work */
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (src == NULL || !dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	dev_open(dst, n);
	memcpy((void *)(uintptr_t)dst, src, n);
	dev_close(dst, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = flush()) != CUDA_SUCCESS) /* synchronous: waits for all queued work */
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (dst == NULL || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	dev_open(src, n);
	memcpy(dst, (const void *)(uintptr_t)src, n);
	dev_close(src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = flush()) != CUDA_SUCCESS) /* synchronous: waits for all queued work */
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n) || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	dev_enter();
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	dev_leave();
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_H2D, .dst = dst, .hsrc = src, .n = n, .stream = s};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (src == NULL || !dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op);
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_D2H, .hdst = dst, .src = src, .n = n, .stream = s};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (dst == NULL || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_D2D, .dst = dst, .src = src, .n = n, .stream = s};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n) || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op);
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = flush()) != CUDA_SUCCESS) /* synchronous: waits for all queued work */
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	dev_open(dst, n);
	memset((void *)(uintptr_t)dst, v, n);
	dev_close(dst, n);
	return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_MEMSET, .dst = dst, .v = v, .n = n, .stream = s};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op);
}

/* ---- streams and events ---- */

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (s == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*s = calloc(1, sizeof **s);
	if (*s == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*s)->flags = flags;
	pthread_mutex_lock(&qmu);
	(*s)->seq = ++stream_seq;
	pthread_mutex_unlock(&qmu);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (s == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	flush(); /* queued work still names it */
	free(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
	CUresult r = need_ctx();
	if (r == CUDA_SUCCESS)
		r = flush(); /* all streams: a valid order */
	return r;
}

CUresult cuStreamQuery(CUstream s)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&qmu);
	r = CUDA_SUCCESS;
	for (size_t i = 0; i < qlen; i++)
		if (queue[i].stream == s)
			r = CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&qmu);
	return r;
}

/* cuStreamWaitEvent makes later work on s wait until the latest record of
   e issued so far has run; an event never recorded is no wait, as in the
   driver. */
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	struct qop op = {.kind = Q_WAIT, .ev = e, .stream = s};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	op.target = e->issued;
	pthread_mutex_unlock(&qmu);
	if (op.target == 0)
		return CUDA_SUCCESS;
	return enqueue(&op);
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*e = calloc(1, sizeof **e);
	return *e == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	flush(); /* queued records still point at it */
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	struct qop op = {.kind = Q_EVENT, .ev = e, .stream = s};
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	e->pending++;
	op.target = ++e->issued;
	pthread_mutex_unlock(&qmu);
	return enqueue(&op);
}

CUresult cuEventSynchronize(CUevent e)
{
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	return flush();
}

CUresult cuEventQuery(CUevent e)
{
	CUresult r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	r = sticky != CUDA_SUCCESS ? sticky : e->pending == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&qmu);
	return r;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	CUresult r;
	if (ms == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (start == NULL || end == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	r = start->pending != 0 || end->pending != 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
	pthread_mutex_unlock(&qmu);
	if (r != CUDA_SUCCESS)
		return r;
	*ms = (float)(end->ms - start->ms);
	return CUDA_SUCCESS;
}

/* ---- modules: PTX text, entries checked against the host builds ---- */

/* parse_entry reads ".entry NAME(" params ")" at s; returns the end. */
static const char *parse_entry(const char *s, struct CUmod_st *m)
{
	const char *p = s + strlen(".entry");
	size_t n = 0;
	int params = 0, bad = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	while (p[n] != 0 && p[n] != '(' && p[n] != ' ' && p[n] != '\n' && n < 127)
		n++;
	if (m->n < MAX_ENTRIES) {
		memcpy(m->names[m->n], p, n);
		m->names[m->n][n] = 0;
	}
	p += n;
	while (*p != 0 && *p != '(')
		p++;
	while (*p != 0 && *p != ')') {
		if (strncmp(p, ".param", 6) == 0) {
			params++;
			p += 6;
			while (*p == ' ' || *p == '\t')
				p++;
			if (strncmp(p, ".u64", 4) != 0 && strncmp(p, ".b64", 4) != 0 && strncmp(p, ".s64", 4) != 0 &&
			    strncmp(p, ".f64", 4) != 0)
				bad = 1;
			continue;
		}
		p++;
	}
	if (m->n < MAX_ENTRIES)
		m->params[m->n++] = bad ? -1 : params;
	return p;
}

/* fatbin_ptx returns the PTX text embedded in a fatbin image (magic
   0xBA55ED50, then a 16-bit version, a 16-bit header size and a 64-bit
   payload size), or NULL. The stand-in runs host builds, so the PTX is
   only checked against them; the SASS is ignored. nvcc stores the PTX
   uncompressed unless told otherwise. */
static const char *fatbin_ptx(const void *image)
{
	const unsigned char *b = image;
	uint32_t magic;
	uint16_t hsize;
	uint64_t size;
	size_t i, n;
	memcpy(&magic, b, 4);
	if (magic != 0xBA55ED50u)
		return NULL;
	memcpy(&hsize, b + 6, 2);
	memcpy(&size, b + 8, 8);
	n = (size_t)hsize + (size_t)size;
	for (i = 0; i + 8 <= n; i++)
		if (memcmp(b + i, ".version", 8) == 0)
			return (const char *)b + i;
	return NULL;
}

CUresult cuModuleLoadData(CUmodule *mod, const void *image)
{
	const char *s = image, *p, *t;
	struct CUmod_st *m;
	int sm = 0;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (mod == NULL || s == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if ((p = fatbin_ptx(image)) != NULL)
		s = p;
	if (strstr(s, ".version") == NULL || (t = strstr(s, ".target")) == NULL)
		return CUDA_ERROR_INVALID_IMAGE;
	if (sscanf(t, ".target sm_%d", &sm) != 1)
		return CUDA_ERROR_INVALID_IMAGE;
	if (sm > 90)
		return CUDA_ERROR_NO_BINARY_FOR_GPU; /* not JIT-able for sm_90 */
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (p = strstr(s, ".entry"); p != NULL; p = strstr(p, ".entry"))
		p = parse_entry(p, m);
	if (m->n == 0) {
		free(m);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	*mod = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule mod)
{
	if (mod == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	free(mod);
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
	int i, nargs = 0;
	tr_host_fn fn;
	struct CUfunc_st *h;
	if (f == NULL || name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (mod == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	for (i = 0; i < mod->n; i++)
		if (strcmp(mod->names[i], name) == 0)
			break;
	if (i == mod->n)
		return CUDA_ERROR_NOT_FOUND;
	fn = tr_host_lookup(name, &nargs);
	if (fn == NULL)
		return CUDA_ERROR_NOT_SUPPORTED; /* a kernel with no host build */
	if (mod->params[i] != nargs)
		return CUDA_ERROR_INVALID_IMAGE; /* PTX and host build disagree */
	h = calloc(1, sizeof *h);
	if (h == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->fn = fn;
	h->nargs = nargs;
	snprintf(h->name, sizeof h->name, "%s", name);
	*f = h;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shmem, CUstream s, void **params, void **extra)
{
	struct qop op;
	int i;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (f == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gy > 65535 || gz > 65535 ||
	    (unsigned long long)bx * by * bz > 1024 || bz > 64)
		return CUDA_ERROR_INVALID_VALUE;
	if (gz != 1 || by != 1 || bz != 1 || shmem != 0 || extra != NULL)
		return CUDA_ERROR_NOT_SUPPORTED; /* our kernels use none of these */
	if (params == NULL || f->nargs > MAX_ARGS)
		return CUDA_ERROR_INVALID_VALUE;
	/* Arguments are captured now, by value, as the driver does. */
	memset(&op, 0, sizeof op);
	op.kind = Q_LAUNCH;
	op.stream = s;
	op.fn = f->fn;
	op.gx = gx;
	op.gy = gy;
	op.bx = bx;
	op.nargs = f->nargs;
	for (i = 0; i < f->nargs; i++) {
		if (params[i] == NULL)
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&op.args[i], params[i], 8);
	}
	return enqueue(&op);
}

/* ---- errors ---- */

CUresult cuGetErrorString(CUresult e, const char **s)
{
	if (s == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	switch (e) {
	case CUDA_SUCCESS:
		*s = "no error";
		break;
	case CUDA_ERROR_OUT_OF_MEMORY:
		*s = "out of memory";
		break;
	case CUDA_ERROR_NOT_SUPPORTED:
		*s = "operation not supported (stand-in driver)";
		break;
	default:
		*s = "stand-in driver error";
	}
	return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult e, const char **s)
{
	return cuGetErrorString(e, s);
}
