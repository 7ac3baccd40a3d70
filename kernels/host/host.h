/*
 * host.h: the host build of every trajring kernel, launched the way the
 * driver launches the PTX: by name, with an array of pointers to 8-byte
 * arguments (cuLaunchKernel's kernelParams) and a grid of gx*gy blocks of
 * bx threads. Each kernel's host build is a body (tr_host_fn, launch.h)
 * that decodes the arguments and runs simulated threads t0..t1-1 of the
 * blocks with blockIdx.y == y, each thread doing its grid-stride share of
 * the work with the same element functions the device runs;
 * tr_host_launch (launch.h) runs a whole grid, in order or, for race
 * exposure, in shuffled units on several host threads. Used by package
 * kernels/host (tests) and by the stand-in driver (gpu/standin), so both
 * exercise exactly the argument decoding and loops of the device kernels.
 */
#ifndef TRAJRING_HOST_H
#define TRAJRING_HOST_H

#include <string.h>

#include "launch.h"
#include "concat.h"
#include "gather_rows.h"
#include "nstep_reward.h"
#include "window_gather.h"
#include "scatter.h"
#include "select.h"
#include "tree.h"

#define TR_ARG_U64(p, i) (*(const tr_u64 *)(p)[i])
#define TR_ARG_I64(p, i) (*(const tr_i64 *)(p)[i])
#define TR_ARG_PTR(T, p, i) ((T)(uintptr_t)TR_ARG_U64(p, i))

#include "testkernels.h"
#include "learner_host.h"
#include "nstep_check_host.h"
#include "stack_gather.h"

static void tr_host_stack_gather(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_u64 ring = TR_ARG_U64(p, 0);
	tr_i64 stride = TR_ARG_I64(p, 1);
	tr_i64 step = TR_ARG_I64(p, 2);
	tr_u64 out = TR_ARG_U64(p, 3);
	tr_u64 nout = TR_ARG_U64(p, 4);
	const tr_win *cur = TR_ARG_PTR(const tr_win *, p, 5);
	const tr_win *next = TR_ARG_PTR(const tr_win *, p, 6);
	tr_i64 n = TR_ARG_I64(p, 7);
	tr_i64 k = TR_ARG_I64(p, 8);
	tr_i64 capacity = TR_ARG_I64(p, 9);
	const tr_u8 *meta = TR_ARG_PTR(const tr_u8 *, p, 10);
	const tr_i64 *cursors = TR_ARG_PTR(const tr_i64 *, p, 11);
	tr_u8 *valid = TR_ARG_PTR(tr_u8 *, p, 12);
	float *masked = TR_ARG_PTR(float *, p, 13);
	tr_i64 tid;
	(void)gy;
	for (tid = t0; tid < t1; tid++) {
		if (y == 0)
			tr_stack_gather_run(ring, stride, step, out, cur, n, k, capacity, meta, cursors, valid, masked, tid, nt);
		else if (nout != 0)
			tr_stack_gather_run(ring, stride, step, nout, next, n, k, capacity, meta, cursors, 0, 0, tid, nt);
	}
}

static void tr_host_scatter(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_col *cols = TR_ARG_PTR(const tr_col *, p, 0);
	tr_i64 ncols = TR_ARG_I64(p, 1);
	const tr_i64 *idx = TR_ARG_PTR(const tr_i64 *, p, 2);
	tr_i64 n = TR_ARG_I64(p, 3);
	tr_i64 tid, c;
	for (tid = t0; tid < t1; tid++)
		for (c = y; c < ncols; c += gy)
			tr_scatter_run(&cols[c], idx, n, tid, nt);
}

static void tr_host_gather_rows(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_col *cols = TR_ARG_PTR(const tr_col *, p, 0);
	tr_i64 ncols = TR_ARG_I64(p, 1);
	const tr_i64 *idx = TR_ARG_PTR(const tr_i64 *, p, 2);
	tr_i64 n = TR_ARG_I64(p, 3);
	tr_i64 tid, c;
	for (tid = t0; tid < t1; tid++)
		for (c = y; c < ncols; c += gy)
			tr_gather_rows_run(&cols[c], idx, n, tid, nt);
}

static void tr_host_concat(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_col *cols = TR_ARG_PTR(const tr_col *, p, 0);
	tr_i64 ncols = TR_ARG_I64(p, 1);
	const tr_i64 *idx = TR_ARG_PTR(const tr_i64 *, p, 2);
	const tr_i64 *nidx = TR_ARG_PTR(const tr_i64 *, p, 3);
	tr_i64 n = TR_ARG_I64(p, 4);
	tr_i64 tid, c;
	for (tid = t0; tid < t1; tid++)
		for (c = y; c < ncols; c += gy)
			tr_concat_run(&cols[c], idx, nidx, n, tid, nt);
}

static void tr_host_gather_windows(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_col *cols = TR_ARG_PTR(const tr_col *, p, 0);
	tr_i64 ncols = TR_ARG_I64(p, 1);
	const tr_win *wins = TR_ARG_PTR(const tr_win *, p, 2);
	tr_i64 nwin = TR_ARG_I64(p, 3);
	tr_i64 seqlen = TR_ARG_I64(p, 4);
	tr_i64 capacity = TR_ARG_I64(p, 5);
	tr_u64 mask = TR_ARG_U64(p, 6);
	tr_i64 ny = ncols + (mask != 0 ? 1 : 0);
	tr_i64 tid, c;
	for (tid = t0; tid < t1; tid++)
		for (c = y; c < ny; c += gy) {
			if (c == ncols)
				tr_window_mask_run(mask, wins, nwin, seqlen, tid, nt);
			else
				tr_gather_windows_run(&cols[c], wins, nwin, seqlen, capacity, tid, nt);
		}
}

static void tr_host_nstep_reward(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *ring = TR_ARG_PTR(const float *, p, 0);
	float *out = TR_ARG_PTR(float *, p, 1);
	const tr_win *wins = TR_ARG_PTR(const tr_win *, p, 2);
	tr_i64 n = TR_ARG_I64(p, 3);
	tr_i64 capacity = TR_ARG_I64(p, 4);
	double gamma = *(const double *)p[5];
	tr_i64 stride = TR_ARG_I64(p, 6);
	tr_i64 tid;
	/* every y-block runs the same windows (and writes the same values), as on the device */
	for (tid = t0; tid < t1; tid++)
		tr_nstep_reward_run(ring, out, wins, n, capacity, gamma, stride, tid, nt);
}

static void tr_host_patch_items(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_item *items = TR_ARG_PTR(tr_item *, p, 0);
	tr_u32 *live = TR_ARG_PTR(tr_u32 *, p, 1);
	double *leaves = TR_ARG_PTR(double *, p, 2);
	const tr_item_patch *patches = TR_ARG_PTR(const tr_item_patch *, p, 3);
	tr_i64 npatch = TR_ARG_I64(p, 4);
	const tr_live_patch *lives = TR_ARG_PTR(const tr_live_patch *, p, 5);
	tr_i64 nlive = TR_ARG_I64(p, 6);
	tr_i64 treen = TR_ARG_I64(p, 7);
	const tr_i64 *groups = TR_ARG_PTR(const tr_i64 *, p, 8);
	tr_i64 tid, l;
	/* One block whose phases the device separates with __syncthreads:
	 * the first unit of the block runs every phase for every thread
	 * before the next (units of other threads do nothing), so the
	 * race-exposure mode keeps the block whole. Every y-block runs the
	 * same patches, as on the device. */
	(void)gy;
	if (t0 != 0)
		return;
	(void)t1;
	for (tid = 0; tid < nt; tid++)
		tr_patch_items_run(items, live, leaves, patches, npatch, lives, nlive, tid, nt);
	for (l = 0; groups != NULL && l < groups[0]; l++)
		for (tid = 0; tid < nt; tid++)
			tr_repair_groups_run(leaves, treen, groups, l, tid, nt);
	(void)y;
}

static void tr_host_draw_uniform(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_item *items = TR_ARG_PTR(const tr_item *, p, 0);
	const tr_u32 *live = TR_ARG_PTR(const tr_u32 *, p, 1);
	tr_i64 nlive = TR_ARG_I64(p, 2);
	tr_u64 seed = TR_ARG_U64(p, 3);
	tr_u64 call = TR_ARG_U64(p, 4);
	double prob = *(const double *)p[5];
	tr_i64 capacity = TR_ARG_I64(p, 6);
	tr_i64 n = TR_ARG_I64(p, 7);
	tr_win *wins = TR_ARG_PTR(tr_win *, p, 8);
	tr_u64 *keys = TR_ARG_PTR(tr_u64 *, p, 9);
	double *probs = TR_ARG_PTR(double *, p, 10);
	double *weights = TR_ARG_PTR(double *, p, 11);
	tr_i64 tid;
	(void)y, (void)gy;
	tr_round_draw((tr_u64)TR_ARG_PTR(const tr_u64 *, p, 12), &call, &nlive, &prob, 0);
	for (tid = t0; tid < t1; tid++)
		tr_draw_uniform_run(items, live, nlive, seed, call, prob, capacity, n, wins, keys, probs, weights, tid, nt);
}

static void tr_host_tree_pull(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	double *tree = TR_ARG_PTR(double *, p, 0);
	tr_i64 n = TR_ARG_I64(p, 1), level = TR_ARG_I64(p, 2);
	tr_u32 *counts = TR_ARG_PTR(tr_u32 *, p, 3);
	tr_i64 tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_tree_pull_run(tree, n, level, counts, tid, nt);
}

static void tr_host_tree_repair(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	double *tree = TR_ARG_PTR(double *, p, 0);
	tr_i64 treen = TR_ARG_I64(p, 1), slots = TR_ARG_I64(p, 2);
	tr_u64 state = TR_ARG_U64(p, 3);
	tr_tree t;
	tr_i64 tid;
	int l;
	/* One block whose phases the device separates with __syncthreads:
	 * the first unit of the block runs every phase for every thread
	 * before the next (as trajring_patch_items' host build does). */
	(void)y, (void)gy, (void)t1;
	if (t0 != 0)
		return;
	tr_tree_layout(treen, &t);
	for (l = 0; l <= t.levels; l++)
		for (tid = 0; tid < nt; tid++)
			tr_tree_repair_run(tree, treen, slots, state, l, tid, nt);
}

static void tr_host_draw_prioritized(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_item *items = TR_ARG_PTR(const tr_item *, p, 0);
	const tr_u32 *live = TR_ARG_PTR(const tr_u32 *, p, 1);
	tr_i64 nlive = TR_ARG_I64(p, 2);
	const double *tree = TR_ARG_PTR(const double *, p, 3);
	tr_i64 n = TR_ARG_I64(p, 4);
	tr_u64 seed = TR_ARG_U64(p, 5), call = TR_ARG_U64(p, 6);
	double beta = *(const double *)p[7];
	tr_i64 capacity = TR_ARG_I64(p, 8), ndraw = TR_ARG_I64(p, 9);
	tr_win *wins = TR_ARG_PTR(tr_win *, p, 10);
	tr_u64 *keys = TR_ARG_PTR(tr_u64 *, p, 11);
	double *probs = TR_ARG_PTR(double *, p, 12);
	double *weights = TR_ARG_PTR(double *, p, 13);
	tr_i64 tid;
	(void)y, (void)gy;
	tr_round_draw((tr_u64)TR_ARG_PTR(const tr_u64 *, p, 14), &call, &nlive, 0, &beta);
	for (tid = t0; tid < t1; tid++)
		tr_draw_prioritized_run(items, live, nlive, tree, n, seed, call, beta, capacity, ndraw, wins, keys, probs,
					 weights, tid, nt);
}

static void tr_host_update_claim(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_item *items = TR_ARG_PTR(const tr_item *, p, 0);
	tr_i64 slots = TR_ARG_I64(p, 1);
	const tr_u64 *keys = TR_ARG_PTR(const tr_u64 *, p, 2);
	tr_i64 n = TR_ARG_I64(p, 3);
	tr_u64 *winners = TR_ARG_PTR(tr_u64 *, p, 4);
	tr_u64 epoch = tr_round_epoch((tr_u64)TR_ARG_PTR(const tr_u64 *, p, 6), TR_ARG_U64(p, 5));
	tr_i64 tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_update_claim_run(items, slots, keys, n, winners, epoch, tid, nt);
}

static void tr_host_update_apply(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_item *items = TR_ARG_PTR(const tr_item *, p, 0);
	tr_i64 treen = TR_ARG_I64(p, 1);
	const tr_u64 *keys = TR_ARG_PTR(const tr_u64 *, p, 2);
	const float *prios = TR_ARG_PTR(const float *, p, 3);
	tr_i64 n = TR_ARG_I64(p, 4), slots = TR_ARG_I64(p, 5);
	tr_u64 state = TR_ARG_U64(p, 6), epoch = tr_round_epoch((tr_u64)TR_ARG_PTR(const tr_u64 *, p, 10), TR_ARG_U64(p, 7));
	double *tree = TR_ARG_PTR(double *, p, 8);
	double a = *(const double *)p[9];
	tr_i64 tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_update_apply_run(items, treen, keys, prios, n, slots, state, epoch, tree, a, tid, nt);
}

/* tr_host_update_one: one block whose phases the device separates with
 * __syncthreads (claims, applies, each level's repair): the first unit of
 * the block runs every phase for every thread before the next, as
 * tr_host_tree_repair does. */
static void tr_host_update_one(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_item *items = TR_ARG_PTR(const tr_item *, p, 0);
	tr_i64 treen = TR_ARG_I64(p, 1);
	const tr_u64 *keys = TR_ARG_PTR(const tr_u64 *, p, 2);
	const float *prios = TR_ARG_PTR(const float *, p, 3);
	tr_i64 n = TR_ARG_I64(p, 4), slots = TR_ARG_I64(p, 5);
	tr_u64 state = TR_ARG_U64(p, 6), epoch = tr_round_epoch((tr_u64)TR_ARG_PTR(const tr_u64 *, p, 10), TR_ARG_U64(p, 7));
	double *tree = TR_ARG_PTR(double *, p, 8);
	double a = *(const double *)p[9];
	tr_i64 tid, bx = nt;
	tr_tree t;
	int l;
	(void)y, (void)gy, (void)t1;
	if (t0 != 0)
		return;
	/* One block: nt is the grid's threads; the backend launches one
	   block, so nt is its size. */
	tr_tree_layout(treen, &t);
	for (tid = 0; tid < bx; tid++)
		tr_update_claim_run(items, treen, keys, n, (tr_u64 *)state, epoch, tid, bx);
	for (tid = 0; tid < bx; tid++)
		tr_update_apply_run(items, treen, keys, prios, n, slots, state, epoch, tree, a, tid, bx);
	for (l = 0; l <= t.levels; l++)
		for (tid = 0; tid < bx; tid++)
			tr_tree_repair_run(tree, treen, slots, state, l, tid, bx);
}

/* tr_host_lookup returns the host build of the kernel with the given entry
 * name and its number of arguments, or NULL. The trajring_test_* entries
 * (testkernels.h) exist only here: no .cu file, no PTX. */
static tr_host_fn tr_host_lookup(const char *name, int *nargs)
{
	static const struct {
		const char *name;
		tr_host_fn fn;
		int nargs;
	} table[] = {
		{"trajring_scatter", tr_host_scatter, 4},
		{"trajring_gather_rows", tr_host_gather_rows, 4},
		{"trajring_concat", tr_host_concat, 5},
		{"trajring_gather_windows", tr_host_gather_windows, 7},
		{"trajring_nstep_reward", tr_host_nstep_reward, 7},
		{"trajring_patch_items", tr_host_patch_items, 9},
		{"trajring_draw_uniform", tr_host_draw_uniform, 13},
		{"trajring_tree_pull", tr_host_tree_pull, 4},
		{"trajring_tree_repair", tr_host_tree_repair, 4},
		{"trajring_draw_prioritized", tr_host_draw_prioritized, 15},
		{"trajring_update_claim", tr_host_update_claim, 7},
		{"trajring_update_apply", tr_host_update_apply, 11},
		{"trajring_update_one", tr_host_update_one, 11},
		{"trajring_nstep_check", tr_host_nstep_check, 15},
		{"trajring_stack_gather", tr_host_stack_gather, 14},
		TR_LEARNER_KERNELS
		TR_TEST_KERNELS
	};
	size_t i;
	for (i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].name, name) == 0) {
			if (nargs)
				*nargs = table[i].nargs;
			return table[i].fn;
		}
	}
	return NULL;
}

#endif /* TRAJRING_HOST_H */
