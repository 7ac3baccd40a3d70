/*
 * testkernels.h: kernels that exist only in the host build, for tests of
 * the launch modes (launch.h): no .cu file, no PTX, so a real driver never
 * finds them. Included by host.h (after the TR_ARG_* macros), which lists
 * them in its lookup table through TR_TEST_KERNELS.
 *
 *  - trajring_test_count_plain(u64 *counter, i64 iters): every simulated
 *    thread adds 1 to *counter iters times with plain (volatile) loads and
 *    stores, a racy read-modify-write; in order it counts every add, in
 *    race exposure it loses some.
 *  - trajring_test_count_atomic(u64 *counter, i64 iters): the same with
 *    tr_atomic_add_u64: never loses one.
 *  - trajring_test_chain(i64 *out, i64 n): thread tid < n writes
 *    out[tid] = out[tid-1] + 1 (out[0] = 1): it reads another thread's
 *    write with no launch boundary, so it is right (1, 2, ..., n) only
 *    when threads run in ascending order.
 *  - trajring_test_cover(u32 *hits, i64 unused): every simulated thread
 *    adds 1 to hits[y*nt + tid] (atomically), so a launch that runs every
 *    (y, tid) exactly once leaves gy*nt ones.
 *  - trajring_test_atomics(u64 *w, i64 unused): every thread uses each
 *    tr_atomic_* helper on shared words (y == 0 only), leaving invariants
 *    that hold in any order only if the helpers are atomic: w[0] and the
 *    u32 w[1] = nt (max of tid+1); one thread wins the CAS of w[2] (u64)
 *    and of the u32 w[4] (w[3] = w[5] = 1, w[2], w[4] in 1..nt); the old
 *    values returned by exchanging tid+1 into w[6] (u64) and the u32 w[8]
 *    sum, with the last value left, to nt(nt+1)/2 (w[7], w[9]); w[10]
 *    counts loads of w[0] below the loader's own max (0).
 */
#ifndef TRAJRING_TESTKERNELS_H
#define TRAJRING_TESTKERNELS_H

#include "kernels.h"

static void tr_test_count_plain(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	volatile tr_u64 *c = TR_ARG_PTR(volatile tr_u64 *, p, 0);
	tr_i64 iters = TR_ARG_I64(p, 1), tid, i;
	for (tid = t0; tid < t1; tid++)
		for (i = 0; i < iters; i++)
			*c = *c + 1;
}

static void tr_test_count_atomic(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_u64 *c = TR_ARG_PTR(tr_u64 *, p, 0);
	tr_i64 iters = TR_ARG_I64(p, 1), tid, i;
	for (tid = t0; tid < t1; tid++)
		for (i = 0; i < iters; i++)
			tr_atomic_add_u64(c, 1);
}

static void tr_test_chain(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	volatile tr_i64 *out = TR_ARG_PTR(volatile tr_i64 *, p, 0);
	tr_i64 n = TR_ARG_I64(p, 1), tid;
	if (y != 0)
		return;
	for (tid = t0; tid < t1 && tid < n; tid++)
		out[tid] = tid == 0 ? 1 : out[tid - 1] + 1;
}

static void tr_test_cover(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_u32 *hits = TR_ARG_PTR(tr_u32 *, p, 0);
	tr_i64 tid;
	for (tid = t0; tid < t1; tid++)
		tr_atomic_add_u32(&hits[y * nt + tid], 1);
}

static void tr_test_atomics(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_u64 *w = TR_ARG_PTR(tr_u64 *, p, 0);
	tr_i64 tid;
	if (y != 0)
		return;
	for (tid = t0; tid < t1; tid++) {
		tr_u64 v = (tr_u64)tid + 1;
		tr_atomic_max_u64(&w[0], v);
		tr_atomic_max_u32((tr_u32 *)&w[1], (tr_u32)v);
		if (tr_atomic_cas_u64(&w[2], 0, v) == 0)
			tr_atomic_add_u64(&w[3], 1);
		if (tr_atomic_cas_u32((tr_u32 *)&w[4], 0, (tr_u32)v) == 0)
			tr_atomic_add_u64(&w[5], 1);
		tr_atomic_add_u64(&w[7], tr_atomic_exch_u64(&w[6], v));
		tr_atomic_add_u64(&w[9], tr_atomic_exch_u32((tr_u32 *)&w[8], (tr_u32)v));
		tr_fence();
		if (tr_atomic_load_u64(&w[0]) < v)
			tr_atomic_add_u64(&w[10], 1);
	}
}

#define TR_TEST_KERNELS                                          \
	{"trajring_test_count_plain", tr_test_count_plain, 2},   \
	    {"trajring_test_count_atomic", tr_test_count_atomic, 2}, \
	    {"trajring_test_chain", tr_test_chain, 2},               \
	    {"trajring_test_cover", tr_test_cover, 2},               \
	    {"trajring_test_atomics", tr_test_atomics, 2},

#endif /* TRAJRING_TESTKERNELS_H */
