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

#define TR_TEST_KERNELS                                          \
	{"trajring_test_count_plain", tr_test_count_plain, 2},   \
	    {"trajring_test_count_atomic", tr_test_count_atomic, 2}, \
	    {"trajring_test_chain", tr_test_chain, 2},               \
	    {"trajring_test_cover", tr_test_cover, 2},

#endif /* TRAJRING_TESTKERNELS_H */
