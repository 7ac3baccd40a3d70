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
 * work really is asynchronous: it runs only when a synchronisation point
 * needs it, streams (the NULL stream too) interleaved adversarially (see
 * "the work queue" below), so a missing synchronisation, event wait or
 * stream ordering shows up in tests. Every other driver entry point is a
 * weak stub from gen-stubs.sh answering CUDA_ERROR_NOT_SUPPORTED.
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
 * fault with CUDA_ERROR_ILLEGAL_ADDRESS (or the CUresult
 * TRAJRING_STANDIN_FAULT_CODE, such as 710 for a device-side assert), a
 * sticky error: the rest of the queue is dropped and every later call
 * returns it, as on a GPU.
 * trajring_standin_device_ns() returns the time spent running queued work
 * and synchronous copies (the "device" time), so benchmarks can report
 * the host time of calls as a GPU would see it; trajring_standin_counts()
 * counts the allocations, frees and host waits, which a real driver
 * serialises every stream of the context for (tests assert that a steady
 * state makes none).
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

/* A stream: the legacy NULL stream (legacy_stream) or one from
   cuStreamCreate. Its fields other than flags are guarded by qmu. */
struct CUstream_st {
	unsigned flags;
	unsigned long issued;     /* ops queued on it so far */
	unsigned long ran;        /* its ops that have run (they run in order) */
	unsigned long need;       /* run_needed: run its ops up to this one */
	size_t cur;               /* run_needed: the queue index of its next op */
	struct CUstream_st *next; /* the live streams, legacy_stream first */
};

static struct CUstream_st legacy_stream;

/* An event; guarded by qmu. */
struct CUevent_st {
	double ms;
	unsigned long issued;       /* records issued */
	unsigned long done;         /* the latest record that has run */
	struct CUstream_st *rec_st; /* the latest record: op rec_k of rec_st */
	unsigned long rec_k;
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
struct hostblock {
	void *p;
	size_t n;
};
static struct hostblock *hosts; /* pinned host memory (cuMemHostAlloc) */
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
static CUresult fault_code = CUDA_ERROR_ILLEGAL_ADDRESS; /* the sticky error it raises */
static long launches_run;
static int protect = 1;   /* device memory PROT_NONE outside the stand-in */
static unsigned long long device_ns;

/* counts of the calls that serialise a real device's streams or wait on
   the host, in the order of trajring_standin_counts. */
enum { C_ALLOC, C_FREE, C_HOST_ALLOC, C_HOST_FREE, C_STREAM_SYNC, C_EVENT_SYNC, C_CTX_SYNC, C_N };
static unsigned long long counts[C_N];

static void count(int c)
{
	__atomic_fetch_add(&counts[c], 1, __ATOMIC_RELAXED);
}

/* trajring_standin_counts copies up to n of the call counts (cuMemAlloc,
   cuMemFree, cuMemHostAlloc, cuMemFreeHost, cuStreamSynchronize,
   cuEventSynchronize, cuCtxSynchronize, since cuInit) into out and
   returns how many there are. */
int trajring_standin_counts(unsigned long long *out, int n)
{
	int i;
	for (i = 0; i < n && i < C_N; i++)
		out[i] = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
	return C_N;
}

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
 * Asynchronous work (the *Async copies and memsets, the synchronous
 * calls that the driver runs asynchronously, event records, stream waits
 * and kernel launches) is not run when it is issued, as a real device
 * would not run it then either: it is queued, in issue order, and run
 * only when a synchronisation point needs it, so a caller that reuses
 * staging memory too early or reads results without synchronising sees
 * wrong bytes in tests, as it would on a GPU.
 *
 * Each op depends on the op before it on its stream, on the record a
 * cuStreamWaitEvent waits for, and on the legacy stream's implicit
 * ordering: an op on the NULL (legacy) stream waits for the work issued
 * before it on every blocking stream (made without
 * CU_STREAM_NON_BLOCKING), and an op on a blocking stream waits for the
 * legacy work issued before it. Nothing else orders streams: in
 * particular, nothing orders the legacy stream against a non-blocking
 * one. A synchronisation point runs only what it must (run_needed): a
 * stream sync that stream's work and what it depends on, an event sync
 * the work before the event's latest record, a synchronous copy the
 * copy and its dependencies; a context sync, cuMemFree and
 * cuMemFreeHost run everything. Among the runnable ops it must run,
 * the one issued last goes first (every stream is treated alike, the
 * NULL stream included), so a consumer that reads without waiting for
 * its producer reads before the producer has written, and a producer
 * that overwrites without waiting for its consumer overwrites first.
 */
enum { Q_H2D, Q_D2H, Q_D2D, Q_MEMSET, Q_EVENT, Q_LAUNCH, Q_WAIT };

#define MAX_ARGS 16
#define MAX_DEPS 16

/* dep is "op k of stream s has run". */
struct dep {
	struct CUstream_st *s; /* NULL: satisfied (its stream was destroyed) */
	unsigned long k;
};

struct qop {
	int kind;
	int done;
	CUdeviceptr dst, src;
	const void *hsrc;
	void *hdst;
	void *own; /* Q_H2D: the stand-in's copy of a pageable source, freed once run */
	size_t n;
	unsigned char v;
	struct CUevent_st *ev; /* Q_EVENT */
	tr_host_fn fn;
	unsigned gx, gy, bx;
	int nargs;
	tr_u64 args[MAX_ARGS];
	struct CUstream_st *st; /* the stream it was issued on */
	unsigned long k;        /* its number on st, from 1 */
	unsigned long long g;   /* its number in issue order */
	unsigned long target;   /* Q_EVENT: the record */
	int ndeps;
	struct dep deps[MAX_DEPS];
};

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static struct qop *queue; /* pending ops in issue order */
static size_t qlen, qcap;
static unsigned long long issue_seq;

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

static int blocking(const struct CUstream_st *s)
{
	return s != &legacy_stream && (s->flags & CU_STREAM_NON_BLOCKING) == 0;
}

/* stream_of maps a stream handle to its stream (NULL and
   CU_STREAM_LEGACY: the legacy stream), or NULL for the per-thread
   default stream, which the stand-in does not model. */
static struct CUstream_st *stream_of(CUstream h)
{
	if (h == NULL || h == CU_STREAM_LEGACY)
		return &legacy_stream;
	if (h == CU_STREAM_PER_THREAD)
		return NULL;
	return h;
}

static int add_dep(struct qop *op, struct CUstream_st *s, unsigned long k)
{
	if (op->ndeps == MAX_DEPS) {
		fprintf(stderr, "trajring stand-in: more than %d blocking streams with pending work\n", MAX_DEPS);
		return -1;
	}
	op->deps[op->ndeps].s = s;
	op->deps[op->ndeps].k = k;
	op->ndeps++;
	return 0;
}

/* enqueue queues op on stream h with its dependencies, and returns its
   stream and number in *st and *k (if not NULL). A wait on an event
   whose latest record has run (or that was never recorded) is no wait
   and queues nothing. */
static CUresult enqueue(struct qop *op, CUstream h, struct CUstream_st **st, unsigned long *k)
{
	struct CUstream_st *s = stream_of(h), *t;
	if (s == NULL)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&qmu);
	op->ndeps = 0;
	op->done = 0;
	if (op->kind == Q_WAIT) {
		struct CUevent_st *e = op->ev;
		op->ev = NULL;
		if (e->done >= e->issued) {
			pthread_mutex_unlock(&qmu);
			return CUDA_SUCCESS;
		}
		add_dep(op, e->rec_st, e->rec_k);
	}
	if (s == &legacy_stream) {
		for (t = legacy_stream.next; t != NULL; t = t->next)
			if (blocking(t) && t->ran < t->issued && add_dep(op, t, t->issued) != 0) {
				pthread_mutex_unlock(&qmu);
				return CUDA_ERROR_NOT_SUPPORTED;
			}
	} else if (blocking(s) && legacy_stream.ran < legacy_stream.issued) {
		add_dep(op, &legacy_stream, legacy_stream.issued);
	}
	if (reserve((void **)&queue, qlen, &qcap, sizeof *queue, 256) != 0) {
		pthread_mutex_unlock(&qmu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->st = s;
	op->k = ++s->issued;
	op->g = ++issue_seq;
	if (op->kind == Q_EVENT) {
		op->target = ++op->ev->issued;
		op->ev->rec_st = s;
		op->ev->rec_k = op->k;
	}
	queue[qlen++] = *op;
	if (st != NULL)
		*st = s;
	if (k != NULL)
		*k = op->k;
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
		free(op->own);
		op->own = NULL;
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
		if (op->target > op->ev->done)
			op->ev->done = op->target;
		break;
	case Q_LAUNCH:
		if (fault_launch > 0 && ++launches_run == fault_launch) {
			sticky = fault_code;
			break;
		}
		for (i = 0; i < op->nargs; i++)
			params[i] = &op->args[i];
		tr_host_launch(op->fn, params, op->gx, op->gy, op->bx);
		break;
	}
}

static int ready(const struct qop *op)
{
	int d;
	for (d = 0; d < op->ndeps; d++)
		if (op->deps[d].s != NULL && op->deps[d].s->ran < op->deps[d].k)
			return 0;
	return 1;
}

/* need asks run_needed to run the ops of s up to its k-th. */
static void need(struct CUstream_st *s, unsigned long k)
{
	if (s->need < k)
		s->need = k;
}

/* need_stream asks for everything issued so far on s; on the legacy
   stream that includes the work of every blocking stream (the legacy
   stream's implicit synchronisation). */
static void need_stream(struct CUstream_st *s)
{
	struct CUstream_st *t;
	need(s, s->issued);
	if (s == &legacy_stream)
		for (t = legacy_stream.next; t != NULL; t = t->next)
			if (blocking(t))
				need(t, t->issued);
}

/*
 * run_needed runs the ops marked with need and every op they depend on,
 * and nothing else: the runnable op issued last first, so that streams
 * interleave adversarially. After a sticky fault the rest of the queue is
 * dropped. The caller holds qmu.
 */
static CUresult run_needed(void)
{
	struct CUstream_st *s, *best;
	size_t i, j;
	int any = 0;
	/* Every dependency is on an op issued earlier: one pass from the
	   newest op back closes the marks over them. */
	for (i = qlen; i-- > 0;) {
		struct qop *op = &queue[i];
		int d;
		if (op->k > op->st->need)
			continue;
		for (d = 0; d < op->ndeps; d++)
			if (op->deps[d].s != NULL)
				need(op->deps[d].s, op->deps[d].k);
	}
	for (s = &legacy_stream; s != NULL; s = s->next) {
		s->cur = qlen;
		any |= s->need > s->ran;
	}
	if (!any)
		return sticky;
	for (i = qlen; i-- > 0;)
		queue[i].st->cur = i; /* ends at each stream's oldest op */
	dev_enter();
	while (sticky == CUDA_SUCCESS) {
		struct qop *op;
		best = NULL;
		for (s = &legacy_stream; s != NULL; s = s->next)
			if (s->need > s->ran && ready(&queue[s->cur]) && (best == NULL || queue[s->cur].g > queue[best->cur].g))
				best = s;
		if (best == NULL)
			break;
		op = &queue[best->cur];
		run_op(op);
		op->done = 1;
		best->ran = op->k;
		for (i = best->cur + 1; i < qlen && queue[i].st != best; i++)
			;
		best->cur = i;
	}
	for (s = &legacy_stream; s != NULL; s = s->next) {
		if (sticky == CUDA_SUCCESS && s->need > s->ran)
			fprintf(stderr, "trajring stand-in: stream work left waiting\n");
		s->need = 0;
	}
	if (sticky != CUDA_SUCCESS) { /* drop the rest: settle events and streams */
		for (i = 0; i < qlen; i++) {
			if (!queue[i].done && queue[i].kind == Q_EVENT && queue[i].target > queue[i].ev->done)
				queue[i].ev->done = queue[i].target;
			free(queue[i].own);
		}
		for (s = &legacy_stream; s != NULL; s = s->next)
			s->ran = s->issued;
		qlen = 0;
	} else {
		for (i = j = 0; i < qlen; i++)
			if (!queue[i].done)
				queue[j++] = queue[i];
		qlen = j;
	}
	dev_leave();
	return sticky;
}

/* sync_stream runs the work issued so far on s (see need_stream). */
static CUresult sync_stream(struct CUstream_st *s)
{
	CUresult r;
	pthread_mutex_lock(&qmu);
	need_stream(s);
	r = run_needed();
	pthread_mutex_unlock(&qmu);
	return r;
}

/* sync_op runs op k of stream s (and what it depends on). */
static CUresult sync_op(struct CUstream_st *s, unsigned long k)
{
	CUresult r;
	pthread_mutex_lock(&qmu);
	need(s, k);
	r = run_needed();
	pthread_mutex_unlock(&qmu);
	return r;
}

/* flush runs all queued work: cuCtxSynchronize, and the frees, which
   synchronise the device. */
static CUresult flush(void)
{
	struct CUstream_st *s;
	CUresult r;
	pthread_mutex_lock(&qmu);
	for (s = &legacy_stream; s != NULL; s = s->next)
		need(s, s->issued);
	r = run_needed();
	pthread_mutex_unlock(&qmu);
	return r;
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
	s = getenv("TRAJRING_STANDIN_FAULT_CODE");
	if (s != NULL && *s != 0)
		fault_code = (CUresult)strtol(s, NULL, 10);
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
	count(C_CTX_SYNC);
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
	count(C_ALLOC);
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
	count(C_FREE);
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

/* cuMemAddressReserve reserves address space with nothing mapped: a
   PROT_NONE mapping, outside every allocation (copies into it fail the
   range checks, and a kernel that reads it faults the process, which is
   why the sticky-fault probe runs only on a GPU). cuMemAddressFree
   releases it. */
struct reservation {
	void *p;
	size_t n;
};
static struct reservation *reserved;
static size_t nreserved, capreserved;

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags)
{
	void *m;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL || n == 0 || n % (size_t)sysconf(_SC_PAGESIZE) != 0 || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (reserve((void **)&reserved, nreserved, &capreserved, sizeof *reserved, 8) != 0) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	reserved[nreserved].p = m;
	reserved[nreserved].n = n;
	nreserved++;
	pthread_mutex_unlock(&mu);
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
	size_t i;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mu);
	for (i = 0; i < nreserved; i++) {
		if ((CUdeviceptr)(uintptr_t)reserved[i].p == p && reserved[i].n == n) {
			munmap(reserved[i].p, n);
			reserved[i] = reserved[--nreserved];
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- pinned host memory ---- */

/* pinned reports whether [p, p+n) lies in one block of pinned host
   memory: the driver copies to and from it by DMA when the copy runs,
   and from any other (pageable) memory through its own staging. */
static int pinned(const void *p, size_t n)
{
	size_t i;
	int ok = 0;
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&mu);
	for (i = 0; i < nhosts; i++) {
		uintptr_t b = (uintptr_t)hosts[i].p;
		if (a >= b && a - b <= hosts[i].n && n <= hosts[i].n - (a - b)) {
			ok = 1;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
	void *m = NULL;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (p == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	count(C_HOST_ALLOC);
	if (posix_memalign(&m, 4096, n ? n : 1) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	if (reserve((void **)&hosts, nhosts, &caphosts, sizeof *hosts, 64) != 0) {
		pthread_mutex_unlock(&mu);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	hosts[nhosts].p = m;
	hosts[nhosts].n = n;
	nhosts++;
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
	count(C_HOST_FREE);
	flush(); /* queued copies may still use the memory */
	pthread_mutex_lock(&mu);
	for (i = 0; i < nhosts; i++) {
		if (hosts[i].p == p) {
			hosts[i] = hosts[--nhosts];
			pthread_mutex_unlock(&mu);
			free(p);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- copies and memsets ----
 * As in the driver (its "API synchronization behavior"): the synchronous
 * calls are on the legacy stream. cuMemcpyHtoD from pageable memory
 * synchronises the legacy stream, stages the bytes and returns: the copy
 * itself may land later, after work on a non-blocking stream issued
 * next (from pinned memory it is done on return). cuMemcpyDtoH returns
 * once its copy (after the legacy stream's earlier work) is done.
 * cuMemcpyDtoD and cuMemsetD8 on device memory do not wait at all. The
 * *Async calls are queued on their stream; from pageable memory the
 * source is staged at the call (it may be reused at once), and into
 * pageable memory the call returns once the copy is done. */

/* h2d queues a copy of n bytes from src (staged at the call unless it is
   pinned) on stream h; with wait it returns once the copy has run. */
static CUresult h2d(CUdeviceptr dst, const void *src, size_t n, CUstream h, int wait)
{
	struct qop op = {.kind = Q_H2D, .dst = dst, .hsrc = src, .n = n};
	struct CUstream_st *st;
	unsigned long k;
	CUresult r;
	if (!pinned(src, n)) {
		op.own = malloc(n);
		if (op.own == NULL)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(op.own, src, n);
		op.hsrc = op.own;
		wait = 0;
	}
	if ((r = enqueue(&op, h, &st, &k)) != CUDA_SUCCESS) {
		free(op.own);
		return r;
	}
	return wait ? sync_op(st, k) : CUDA_SUCCESS;
}

/* d2h queues a copy of n bytes from src into dst on stream h and, with
   wait or into pageable memory, returns once it has run. */
static CUresult d2h(void *dst, CUdeviceptr src, size_t n, CUstream h, int wait)
{
	struct qop op = {.kind = Q_D2H, .hdst = dst, .src = src, .n = n};
	struct CUstream_st *st;
	unsigned long k;
	CUresult r = enqueue(&op, h, &st, &k);
	if (r != CUDA_SUCCESS)
		return r;
	return wait || !pinned(dst, n) ? sync_op(st, k) : CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (src == NULL || !dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	if (!pinned(src, n) && (r = sync_stream(&legacy_stream)) != CUDA_SUCCESS)
		return r;
	return h2d(dst, src, n, NULL, 1);
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (dst == NULL || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	return d2h(dst, src, n, NULL, 1);
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return cuMemcpyDtoDAsync(dst, src, n, NULL);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (src == NULL || !dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	return h2d(dst, src, n, s, 0);
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (dst == NULL || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	return d2h(dst, src, n, s, 0);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_D2D, .dst = dst, .src = src, .n = n};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n) || !dev_range(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op, s, NULL, NULL);
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
	return cuMemsetD8Async(dst, v, n, NULL);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
	struct qop op = {.kind = Q_MEMSET, .dst = dst, .v = v, .n = n};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dev_range(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	return enqueue(&op, s, NULL, NULL);
}

/* ---- streams and events ---- */

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	struct CUstream_st *t;
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
	for (t = &legacy_stream; t->next != NULL; t = t->next)
		;
	t->next = *s;
	pthread_mutex_unlock(&qmu);
	return CUDA_SUCCESS;
}

/* cuStreamDestroy runs the stream's work first (the driver finishes it
   after the call returns); what waited for it is then satisfied. */
CUresult cuStreamDestroy(CUstream s)
{
	struct CUstream_st *t;
	size_t i;
	int d;
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	need(s, s->issued);
	run_needed();
	for (i = 0; i < qlen; i++)
		for (d = 0; d < queue[i].ndeps; d++)
			if (queue[i].deps[d].s == s)
				queue[i].deps[d].s = NULL;
	for (t = &legacy_stream; t->next != NULL && t->next != s; t = t->next)
		;
	if (t->next == s)
		t->next = s->next;
	pthread_mutex_unlock(&qmu);
	free(s);
	return CUDA_SUCCESS;
}

/* cuStreamSynchronize runs the stream's work and what it depends on,
   nothing else. */
CUresult cuStreamSynchronize(CUstream s)
{
	struct CUstream_st *st = stream_of(s);
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (st == NULL)
		return CUDA_ERROR_NOT_SUPPORTED;
	count(C_STREAM_SYNC);
	return sync_stream(st);
}

CUresult cuStreamQuery(CUstream s)
{
	struct CUstream_st *st = stream_of(s);
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (st == NULL)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&qmu);
	r = st->ran < st->issued ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
	pthread_mutex_unlock(&qmu);
	return r;
}

/* cuStreamWaitEvent makes later work on s wait until the latest record of
   e issued so far has run; an event never recorded is no wait, as in the
   driver. */
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	struct qop op = {.kind = Q_WAIT, .ev = e};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	return enqueue(&op, s, NULL, NULL);
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

/* cuEventDestroy runs the event's queued records first (they point at
   it); waits on it depend on the records' streams, not on the event. */
CUresult cuEventDestroy(CUevent e)
{
	size_t i;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	for (i = 0; i < qlen; i++)
		if (queue[i].kind == Q_EVENT && queue[i].ev == e)
			need(queue[i].st, queue[i].k);
	run_needed();
	pthread_mutex_unlock(&qmu);
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	struct qop op = {.kind = Q_EVENT, .ev = e};
	CUresult r = need_ctx();
	if (r != CUDA_SUCCESS)
		return r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	return enqueue(&op, s, NULL, NULL);
}

/* cuEventSynchronize runs the work before the event's latest record,
   nothing else. */
CUresult cuEventSynchronize(CUevent e)
{
	CUresult r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	count(C_EVENT_SYNC);
	pthread_mutex_lock(&qmu);
	if (e->done < e->issued)
		need(e->rec_st, e->rec_k);
	r = run_needed();
	pthread_mutex_unlock(&qmu);
	return r;
}

CUresult cuEventQuery(CUevent e)
{
	CUresult r;
	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&qmu);
	r = sticky != CUDA_SUCCESS ? sticky : e->done >= e->issued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
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
	r = start->done < start->issued || end->done < end->issued ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
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
	return enqueue(&op, s, NULL, NULL);
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
