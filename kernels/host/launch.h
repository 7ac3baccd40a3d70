/*
 * launch.h: how the host build runs the simulated threads of a launch.
 *
 * A kernel's host build is a body (tr_host_fn) that runs the simulated
 * threads t0 <= tid < t1 of the blocks whose blockIdx.y is y; tid is the
 * global thread id, blockIdx.x * blockDim.x + threadIdx.x, of nt =
 * gridDim.x * blockDim.x, and gy is gridDim.y. tr_host_launch runs a grid
 * of gx*gy blocks of bx threads in one of two modes:
 *
 *  - in order (the default): for each y, every tid in turn, on the calling
 *    thread. A kernel whose threads share nothing computes the same bytes
 *    as on the device; but a kernel whose threads race (a non-atomic
 *    read-modify-write of one word) or that reads what another thread of
 *    the same launch wrote (with no launch boundary in between) also
 *    "works", since no two threads ever overlap and lower threads always
 *    run first.
 *
 *  - race exposure (threads >= 1): the grid is cut into units of `chunk`
 *    consecutive threads of one block and one y (default 32, a warp; a
 *    unit never spans blocks), the units are put in a shuffled order
 *    (Fisher-Yates driven by splitmix64 of the seed and the launch's
 *    number since the mode was set, so every launch gets its own order
 *    and the same seed repeats the same orders), and `threads` host
 *    threads (the caller and threads-1 pthreads, released together) take
 *    units from that order until none is left. Racing read-modify-writes
 *    then lose updates, and a thread that reads another's write sees it
 *    missing whenever the writer's unit has not run yet. With threads = 1
 *    only the order changes: a deterministic, seed-reproducible way to
 *    show order dependence.
 *
 * The mode is read once from the environment, at the first launch or
 * mode call of the program: TRAJRING_STANDIN_THREADS (0 or unset: in
 * order; 1..TR_HOST_MAX_THREADS: race exposure), TRAJRING_STANDIN_CHUNK
 * (threads per unit, default 32) and TRAJRING_STANDIN_SEED (default 1);
 * tr_host_set_mode changes it at run time (tests: host.SetMode in Go, and
 * gpu.SetStandinMode for the stand-in driver, whose copy of this file is
 * its own). A launch reads the mode when it starts.
 *
 * What the mode cannot show: block-level synchronisation and shared
 * memory (no kernel uses them; the stand-in refuses launches with shared
 * memory), intra-unit races (a unit's threads run one after another: use
 * chunk 1 to race single threads), and missing fences on weakly ordered
 * hardware (x86 stores become visible in order). Kernels that share
 * memory between threads use the tr_atomic_* helpers of kernels.h, which
 * are real atomics in the host build.
 */
#ifndef TRAJRING_LAUNCH_H
#define TRAJRING_LAUNCH_H

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "kernels.h"

typedef void (*tr_host_fn)(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy);

/* TR_HOST_MAX_THREADS caps the host threads of race exposure. */
#define TR_HOST_MAX_THREADS 64
#define TR_HOST_CHUNK 32
/* TR_HOST_MAX_SHUFFLE is the most units a launch shuffles. */
#define TR_HOST_MAX_SHUFFLE (1 << 22)

/* The mode: read and written with __atomic builtins (set from Go while a
   launch may run on another thread). tr_host_nlaunch counts launches since
   the mode was last set (it picks each launch's order). */
static int tr_host_threads, tr_host_chunk = TR_HOST_CHUNK;
static tr_u64 tr_host_seed = 1, tr_host_nlaunch;
static pthread_once_t tr_host_once = PTHREAD_ONCE_INIT;

static tr_i64 tr_host_env(const char *name, tr_i64 def)
{
	const char *s = getenv(name);
	if (s == NULL || *s == 0)
		return def;
	return (tr_i64)strtoull(s, NULL, 0);
}

static void tr_host_mode_clamp(int *threads, int *chunk)
{
	if (*threads < 0)
		*threads = 0;
	if (*threads > TR_HOST_MAX_THREADS)
		*threads = TR_HOST_MAX_THREADS;
	if (*chunk < 1)
		*chunk = TR_HOST_CHUNK;
}

static void tr_host_mode_init(void)
{
	tr_i64 t = tr_host_env("TRAJRING_STANDIN_THREADS", 0), c = tr_host_env("TRAJRING_STANDIN_CHUNK", TR_HOST_CHUNK);
	int threads = t < 0 ? 0 : t > TR_HOST_MAX_THREADS ? TR_HOST_MAX_THREADS : (int)t;
	int chunk = c < 1 || c > (1 << 30) ? TR_HOST_CHUNK : (int)c;
	__atomic_store_n(&tr_host_threads, threads, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tr_host_chunk, chunk, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tr_host_seed, (tr_u64)tr_host_env("TRAJRING_STANDIN_SEED", 1), __ATOMIC_SEQ_CST);
}

/* tr_host_get_mode returns the current mode. */
static void tr_host_get_mode(int *threads, int *chunk, tr_u64 *seed)
{
	pthread_once(&tr_host_once, tr_host_mode_init);
	*threads = __atomic_load_n(&tr_host_threads, __ATOMIC_SEQ_CST);
	*chunk = __atomic_load_n(&tr_host_chunk, __ATOMIC_SEQ_CST);
	*seed = __atomic_load_n(&tr_host_seed, __ATOMIC_SEQ_CST);
}

/* tr_host_set_mode sets the mode (threads 0: in order; chunk < 1: 32) and
   restarts the launch count, so the same seed gives the same orders. */
static void tr_host_set_mode(int threads, int chunk, tr_u64 seed)
{
	pthread_once(&tr_host_once, tr_host_mode_init);
	tr_host_mode_clamp(&threads, &chunk);
	__atomic_store_n(&tr_host_threads, threads, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tr_host_chunk, chunk, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tr_host_seed, seed, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tr_host_nlaunch, 0, __ATOMIC_SEQ_CST);
}

static tr_u64 tr_splitmix64(tr_u64 *s)
{
	tr_u64 z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* tr_grid is one launch in race exposure, shared by its host threads. */
struct tr_grid {
	tr_host_fn fn;
	void **p;
	tr_i64 gx, gy, bx, nt, chunk, per_block, nunits;
	tr_i64 *order; /* the shuffled units; NULL: in order */
	tr_i64 next;   /* the next entry of order to take (atomic) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ready; /* workers waiting for go */
	int go;
};

/* tr_grid_work takes units until none is left. */
static void tr_grid_work(struct tr_grid *g)
{
	for (;;) {
		tr_i64 k = __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED), u, y, rest, b, c, t0, t1;
		if (k >= g->nunits)
			return;
		u = g->order != NULL ? g->order[k] : k;
		y = u / (g->gx * g->per_block);
		rest = u % (g->gx * g->per_block);
		b = rest / g->per_block;
		c = rest % g->per_block;
		t0 = b * g->bx + c * g->chunk;
		t1 = t0 + g->chunk;
		if (t1 > (b + 1) * g->bx)
			t1 = (b + 1) * g->bx;
		g->fn(g->p, y, t0, t1, g->nt, g->gy);
	}
}

static void *tr_grid_worker(void *arg)
{
	struct tr_grid *g = arg;
	pthread_mutex_lock(&g->mu);
	g->ready++;
	pthread_cond_broadcast(&g->cv);
	while (!g->go)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	tr_grid_work(g);
	return NULL;
}

/* tr_host_launch runs fn over a grid of gx*gy blocks of bx threads (all
   >= 1) in the current mode and returns when every thread has run. */
static void tr_host_launch(tr_host_fn fn, void **p, tr_i64 gx, tr_i64 gy, tr_i64 bx)
{
	struct tr_grid g;
	pthread_t tids[TR_HOST_MAX_THREADS];
	sigset_t all, old;
	int threads, chunk, started = 0, i;
	tr_u64 seed, rng;
	tr_i64 y, k;
	tr_host_get_mode(&threads, &chunk, &seed);
	if (threads == 0) {
		for (y = 0; y < gy; y++)
			fn(p, y, 0, gx * bx, gx * bx, gy);
		return;
	}
	g.fn = fn;
	g.p = p;
	g.gx = gx;
	g.gy = gy;
	g.bx = bx;
	g.nt = gx * bx;
	g.chunk = chunk < bx ? chunk : bx;
	g.per_block = (bx + g.chunk - 1) / g.chunk;
	g.nunits = gy * gx * g.per_block;
	g.next = 0;
	g.ready = 0;
	g.go = 0;
	/* The order: Fisher-Yates; for grids of more than TR_HOST_MAX_SHUFFLE
	   units, or with no memory for it, units run in order (still on
	   several threads). */
	g.order = g.nunits <= TR_HOST_MAX_SHUFFLE ? malloc((size_t)g.nunits * sizeof *g.order) : NULL;
	if (g.order != NULL) {
		rng = seed ^ (__atomic_fetch_add(&tr_host_nlaunch, 1, __ATOMIC_SEQ_CST) * 0xD1B54A32D192ED03ULL);
		for (k = 0; k < g.nunits; k++)
			g.order[k] = k;
		for (k = g.nunits - 1; k > 0; k--) {
			tr_i64 j = (tr_i64)(tr_splitmix64(&rng) % (tr_u64)(k + 1)), t = g.order[k];
			g.order[k] = g.order[j];
			g.order[j] = t;
		}
	}
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	/* Workers block every signal but the synchronous faults: they run no
	   Go code and must not take the process's signals. A kernel that
	   faults on a worker kills the process (signal: segmentation fault)
	   without the Go runtime's "signal arrived during cgo execution"
	   report, which only the calling thread gets: rerun in order to see
	   it. A worker that cannot start leaves its share to the others. */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < threads - 1 && (tr_i64)i < g.nunits - 1; i++)
		if (pthread_create(&tids[started], NULL, tr_grid_worker, &g) == 0)
			started++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* Release every thread at once, so that their units overlap. */
	pthread_mutex_lock(&g.mu);
	while (g.ready < started)
		pthread_cond_wait(&g.cv, &g.mu);
	g.go = 1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	tr_grid_work(&g);
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_cond_destroy(&g.cv);
	pthread_mutex_destroy(&g.mu);
	free(g.order);
}

#endif /* TRAJRING_LAUNCH_H */
