/*
 * learner_host.h: the host builds of the learner kernels (gemm.h, mlp.h,
 * td_loss.h, grad_norm.h, adam.h): argument decoders in the form of
 * host.h's, which includes this file after its TR_ARG_* macros and lists
 * the entries in tr_host_lookup. They sit in a strict region (rnf.h) like
 * the run functions they call.
 */
#ifndef TRAJRING_LEARNER_HOST_H
#define TRAJRING_LEARNER_HOST_H

#include "gemm.h"
#include "mlp.h"
#include "td_loss.h"
#include "grad_norm.h"
#include "adam.h"

#define TR_ARG_F64(p, i) (*(const double *)(p)[i])

TR_STRICT_BEGIN

/* tr_host_gemm_mac_tile is tr_gemm_mac for every thread of a block at
 * once: thread t's sum is s[t], row t / TR_GEMM_T and column t %
 * TR_GEMM_T of the tile, and each sum takes the same products in the
 * same order (l ascending), so the results are the same bit for bit; the
 * columns of a row are independent, so the compiler vectorizes the inner
 * loop (the stand-in runs a training step's GEMMs several times faster). */
static void tr_host_gemm_mac_tile(float *restrict s, const float *restrict as, const float *restrict bs, tr_i64 kn)
{
	int r, c;
	tr_i64 l;
	for (r = 0; r < TR_GEMM_T; r++) {
		float *restrict sr = s + r * TR_GEMM_T;
		const float *ar = as + r * TR_GEMM_TS;
		for (l = 0; l < kn; l++) {
			const float a = ar[l], *bl = bs + l * TR_GEMM_TS;
			for (c = 0; c < TR_GEMM_T; c++)
				sr[c] = TR_FADD(sr[c], TR_FMUL(a, bl[c]));
		}
	}
}

/* tr_host_gemm_tile computes tile `tile` of C = op(A)·op(B) with its
 * epilogues for every thread of a block at once, phase by phase, as the
 * device's __syncthreads separate them (the adds of all its threads at
 * once, in tr_host_gemm_mac_tile): trajring_gemm's loop body. */
static void tr_host_gemm_tile(const float *a, const float *b, float *c, tr_i64 m, tr_i64 n, tr_i64 k, tr_i64 flags,
			      const float *bias, const float *yv, tr_i64 tile)
{
	float as[TR_GEMM_T * TR_GEMM_TS], bs[TR_GEMM_T * TR_GEMM_TS], s[TR_GEMM_THREADS];
	tr_i64 k0, i0, j0;
	int t;
	tr_gemm_origin(tile, n, &i0, &j0);
	for (t = 0; t < TR_GEMM_THREADS; t++)
		s[t] = tr_gemm_init(c, m, n, flags, i0, j0, t);
	for (k0 = 0; k0 < k; k0 += TR_GEMM_T) {
		tr_i64 kn = k - k0 < TR_GEMM_T ? k - k0 : TR_GEMM_T;
		for (t = 0; t < TR_GEMM_THREADS; t++)
			tr_gemm_load(a, b, m, n, k, flags, i0, j0, k0, t, as, bs);
		tr_host_gemm_mac_tile(s, as, bs, kn);
	}
	for (t = 0; t < TR_GEMM_THREADS; t++)
		tr_gemm_store(c, m, n, i0, j0, t, s[t], flags, bias, yv);
}

/* tr_host_blocks sets the first block of TR_GEMM_THREADS threads whose
 * first thread is in [t0, t1) and the number of blocks, nt /
 * TR_GEMM_THREADS (the gpu backend launches blocks of that size): the
 * race-exposure mode hands each block's first unit the whole block and
 * its other units nothing. */
static void tr_host_blocks(tr_i64 t0, tr_i64 nt, tr_i64 *first, tr_i64 *nblocks)
{
	*nblocks = nt / TR_GEMM_THREADS;
	if (*nblocks < 1)
		*nblocks = 1;
	*first = (t0 + TR_GEMM_THREADS - 1) / TR_GEMM_THREADS;
}

/* tr_host_gemm runs every block whose first thread is in [t0, t1) as a
 * whole (tr_host_blocks, tr_host_gemm_tile). */
static void tr_host_gemm(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *a = TR_ARG_PTR(const float *, p, 0), *b = TR_ARG_PTR(const float *, p, 1);
	float *c = TR_ARG_PTR(float *, p, 2);
	tr_i64 m = TR_ARG_I64(p, 3), n = TR_ARG_I64(p, 4), k = TR_ARG_I64(p, 5), flags = TR_ARG_I64(p, 6);
	const float *bias = TR_ARG_PTR(const float *, p, 7), *yv = TR_ARG_PTR(const float *, p, 8);
	tr_i64 nblocks, blk, tile, tiles = tr_gemm_tiles(m, n);
	(void)y, (void)gy;
	tr_host_blocks(t0, nt, &blk, &nblocks);
	for (; blk < nblocks && blk * TR_GEMM_THREADS < t1; blk++)
		for (tile = blk; tile < tiles; tile += nblocks)
			tr_host_gemm_tile(a, b, c, m, n, k, flags, bias, yv, tile);
}

/* tr_host_gemm3 is trajring_gemm3 for the blocks whose first thread is
 * in [t0, t1). */
static void tr_host_gemm3(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *a0 = TR_ARG_PTR(const float *, p, 0), *b0 = TR_ARG_PTR(const float *, p, 1);
	float *c0 = TR_ARG_PTR(float *, p, 2);
	const float *e0 = TR_ARG_PTR(const float *, p, 3);
	const float *a1 = TR_ARG_PTR(const float *, p, 4), *b1 = TR_ARG_PTR(const float *, p, 5);
	float *c1 = TR_ARG_PTR(float *, p, 6);
	const float *e1 = TR_ARG_PTR(const float *, p, 7);
	const float *a2 = TR_ARG_PTR(const float *, p, 8), *b2 = TR_ARG_PTR(const float *, p, 9);
	float *c2 = TR_ARG_PTR(float *, p, 10);
	const float *e2 = TR_ARG_PTR(const float *, p, 11);
	tr_i64 m = TR_ARG_I64(p, 12), n = TR_ARG_I64(p, 13), k = TR_ARG_I64(p, 14), flags = TR_ARG_I64(p, 15);
	tr_i64 tiles = tr_gemm_tiles(m, n), total = tiles * ((c0 != 0) + (c1 != 0) + (c2 != 0)), nblocks, blk, tile, local = 0;
	(void)y, (void)gy;
	tr_host_blocks(t0, nt, &blk, &nblocks);
	for (; blk < nblocks && blk * TR_GEMM_THREADS < t1; blk++)
		for (tile = blk; tile < total; tile += nblocks) {
			int q = tr_gemm3_pick(tile, tiles, c0, c1, c2, &local);
			const float *e = q == 0 ? e0 : q == 1 ? e1 : e2;
			tr_host_gemm_tile(q == 0 ? a0 : q == 1 ? a1 : a2, q == 0 ? b0 : q == 1 ? b1 : b2, q == 0 ? c0 : q == 1 ? c1 : c2,
					  m, n, k, flags, (flags & TR_GEMM_BIAS) ? e : 0, (flags & TR_GEMM_BIAS) ? 0 : e, local);
		}
}

/* tr_host_gemm_back is trajring_gemm_back for the blocks whose first
 * thread is in [t0, t1): each block's tiles, then its ticket; the block
 * that takes the last computes the norm (every partial, then their sum)
 * as the device's last block does. */
static void tr_host_gemm_back(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *x = TR_ARG_PTR(const float *, p, 0), *dz = TR_ARG_PTR(const float *, p, 1);
	const float *w = TR_ARG_PTR(const float *, p, 2), *yv = TR_ARG_PTR(const float *, p, 3);
	float *gw = TR_ARG_PTR(float *, p, 4), *gb = TR_ARG_PTR(float *, p, 5), *dx = TR_ARG_PTR(float *, p, 6);
	tr_i64 bsz = TR_ARG_I64(p, 7), k = TR_ARG_I64(p, 8), n = TR_ARG_I64(p, 9);
	const float *g = TR_ARG_PTR(const float *, p, 10);
	tr_i64 ng = TR_ARG_I64(p, 11), parts = TR_ARG_I64(p, 12);
	tr_u64 *state = TR_ARG_PTR(tr_u64 *, p, 13);
	double maxnorm = TR_ARG_F64(p, 14);
	tr_i64 total = tr_gemm_back_tiles(bsz, k, n, dx), nblocks, blk, tile, q;
	(void)y, (void)gy;
	tr_host_blocks(t0, nt, &blk, &nblocks);
	for (; blk < nblocks && blk * TR_GEMM_THREADS < t1; blk++) {
		for (tile = blk; tile < total; tile += nblocks) {
			const float *a, *b;
			float *c;
			tr_i64 m_, n_, k_, flags, local;
			local = tr_gemm_back_pick(tile, x, dz, w, yv, gw, gb, dx, bsz, k, n, &a, &b, &c, &m_, &n_, &k_, &flags);
			tr_host_gemm_tile(a, b, c, m_, n_, k_, flags, 0, yv, local);
		}
		if (state == 0)
			continue;
		tr_fence();
		if (tr_atomic_add_u64(state, 1) != (tr_u64)nblocks - 1)
			continue;
		tr_fence();
		for (q = 0; q < parts; q++)
			((double *)((char *)state + TR_NORM_STATE_PARTIAL))[q] = tr_norm_part(g, ng, parts, q);
		tr_norm_state_finish(state, parts, maxnorm);
	}
}

static void tr_host_bias_relu(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	float *z = TR_ARG_PTR(float *, p, 0);
	const float *bias = TR_ARG_PTR(const float *, p, 1);
	tr_i64 rows = TR_ARG_I64(p, 2), cols = TR_ARG_I64(p, 3), relu = TR_ARG_I64(p, 4), tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_bias_relu_run(z, bias, rows, cols, relu, tid, nt);
}

static void tr_host_relu_grad(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	float *dy = TR_ARG_PTR(float *, p, 0);
	const float *yv = TR_ARG_PTR(const float *, p, 1);
	tr_i64 n = TR_ARG_I64(p, 2), tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_relu_grad_run(dy, yv, n, tid, nt);
}

static void tr_host_col_sum(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *x = TR_ARG_PTR(const float *, p, 0);
	float *out = TR_ARG_PTR(float *, p, 1);
	tr_i64 rows = TR_ARG_I64(p, 2), cols = TR_ARG_I64(p, 3), tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_col_sum_run(x, out, rows, cols, tid, nt);
}

static void tr_host_argmax(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *x = TR_ARG_PTR(const float *, p, 0);
	tr_i64 *out = TR_ARG_PTR(tr_i64 *, p, 1);
	tr_i64 rows = TR_ARG_I64(p, 2), cols = TR_ARG_I64(p, 3), tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_argmax_run(x, out, rows, cols, tid, nt);
}

static void tr_host_td_loss(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *q = TR_ARG_PTR(const float *, p, 0), *qno = TR_ARG_PTR(const float *, p, 1);
	const float *qnt = TR_ARG_PTR(const float *, p, 2);
	const tr_i64 *act = TR_ARG_PTR(const tr_i64 *, p, 3);
	const float *rew = TR_ARG_PTR(const float *, p, 4), *disc = TR_ARG_PTR(const float *, p, 5);
	const double *w = TR_ARG_PTR(const double *, p, 6);
	const tr_u8 *valid = TR_ARG_PTR(const tr_u8 *, p, 7);
	tr_i64 bsz = TR_ARG_I64(p, 8), na = TR_ARG_I64(p, 9), tid;
	double eps = TR_ARG_F64(p, 10);
	float *dq = TR_ARG_PTR(float *, p, 11), *td = TR_ARG_PTR(float *, p, 12), *prio = TR_ARG_PTR(float *, p, 13);
	float *rowloss = TR_ARG_PTR(float *, p, 14);
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_td_loss_run(q, qno, qnt, act, rew, disc, w, valid, bsz, na, eps, dq, td, prio, rowloss, tid, nt);
}

static void tr_host_norm_partial(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const float *g = TR_ARG_PTR(const float *, p, 0);
	tr_i64 n = TR_ARG_I64(p, 1), parts = TR_ARG_I64(p, 2), tid;
	double *partial = TR_ARG_PTR(double *, p, 3);
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_norm_partial_run(g, n, parts, partial, tid, nt);
}

static void tr_host_norm_finish(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const double *partial = TR_ARG_PTR(const double *, p, 0);
	tr_i64 parts = TR_ARG_I64(p, 1), tid;
	double maxnorm = TR_ARG_F64(p, 2);
	double *norm = TR_ARG_PTR(double *, p, 3);
	float *scale = TR_ARG_PTR(float *, p, 4);
	(void)y, (void)gy, (void)nt;
	for (tid = t0; tid < t1; tid++)
		tr_norm_finish_run(partial, parts, maxnorm, norm, scale, tid);
}

static void tr_host_adam(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	float *w = TR_ARG_PTR(float *, p, 0);
	const float *g = TR_ARG_PTR(const float *, p, 1);
	float *m = TR_ARG_PTR(float *, p, 2), *v = TR_ARG_PTR(float *, p, 3);
	tr_i64 n = TR_ARG_I64(p, 4), tid;
	const float *scale = TR_ARG_PTR(const float *, p, 5);
	float b1 = (float)TR_ARG_F64(p, 6), b2 = (float)TR_ARG_F64(p, 7), omb1 = (float)TR_ARG_F64(p, 8);
	float omb2 = (float)TR_ARG_F64(p, 9), eps = (float)TR_ARG_F64(p, 10), neglr = (float)TR_ARG_F64(p, 11);
	float c1 = (float)TR_ARG_F64(p, 12), c2 = (float)TR_ARG_F64(p, 13);
	tr_u64 *hyper = TR_ARG_PTR(tr_u64 *, p, 14), t = 0;
	(void)y, (void)gy;
	if (hyper != 0)
		t = tr_adam_hyper(hyper, &neglr, &c1, &c2);
	for (tid = t0; tid < t1; tid++)
		tr_adam_run(w, g, m, v, n, scale, b1, b2, omb1, omb2, eps, neglr, c1, c2, tid, nt);
	if (hyper != 0) /* these threads have read t (a unit, or the grid) */
		tr_adam_advance(hyper, t, (tr_u64)(t1 - t0), (tr_u64)nt);
}

/* tr_host_td_head is trajring_td_head for the blocks whose first thread
 * is in [t0, t1): each block's tiles, then its ticket; the block that
 * takes the last computes the TD loss of every transition. */
static void tr_host_td_head(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	tr_u64 *d = TR_ARG_PTR(tr_u64 *, p, 0);
	const tr_i64 *act = TR_ARG_PTR(const tr_i64 *, p, 1);
	const float *rew = TR_ARG_PTR(const float *, p, 2), *disc = TR_ARG_PTR(const float *, p, 3);
	const double *w = TR_ARG_PTR(const double *, p, 4);
	const tr_u8 *valid = TR_ARG_PTR(const tr_u8 *, p, 5);
	const float *x0 = (const float *)d[TR_TDH_X0], *x1 = (const float *)d[TR_TDH_X1], *x2 = (const float *)d[TR_TDH_X2];
	const float *wo = (const float *)d[TR_TDH_W], *bo = (const float *)d[TR_TDH_B];
	const float *wt = (const float *)d[TR_TDH_WT], *bt = (const float *)d[TR_TDH_BT];
	float *q = (float *)d[TR_TDH_Q], *qno = (float *)d[TR_TDH_QNO], *qnt = (float *)d[TR_TDH_QNT];
	tr_i64 bsz = (tr_i64)d[TR_TDH_BSZ], k = (tr_i64)d[TR_TDH_K], na = (tr_i64)d[TR_TDH_NA];
	double eps = ((const double *)d)[TR_TDH_EPS];
	tr_i64 tiles = tr_gemm_tiles(bsz, na), total = tiles * (2 + (qno != 0)), nblocks, blk, tile, local = 0, tid;
	(void)y, (void)gy;
	tr_host_blocks(t0, nt, &blk, &nblocks);
	for (; blk < nblocks && blk * TR_GEMM_THREADS < t1; blk++) {
		for (tile = blk; tile < total; tile += nblocks) {
			int q3 = tr_gemm3_pick(tile, tiles, q, qno, qnt, &local);
			tr_host_gemm_tile(q3 == 0 ? x0 : q3 == 1 ? x1 : x2, q3 == 2 ? wt : wo, q3 == 0 ? q : q3 == 1 ? qno : qnt, bsz, na, k,
					  TR_GEMM_BIAS, q3 == 2 ? bt : bo, 0, local);
		}
		tr_fence();
		if (tr_atomic_add_u64(d + TR_TDH_COUNT, 1) != (tr_u64)nblocks - 1)
			continue;
		tr_atomic_exch_u64(d + TR_TDH_COUNT, 0);
		tr_fence();
		for (tid = 0; tid < TR_GEMM_THREADS; tid++)
			tr_td_loss_run(q, qno, qnt, act, rew, disc, w, valid, bsz, na, eps, (float *)d[TR_TDH_DQ], (float *)d[TR_TDH_TD],
				       (float *)d[TR_TDH_PRIO], (float *)d[TR_TDH_RL], tid, TR_GEMM_THREADS);
	}
}

TR_STRICT_END

/* TR_LEARNER_KERNELS are the rows of tr_host_lookup's table for the
 * kernels above. */
#define TR_LEARNER_KERNELS                                   \
	{"trajring_gemm", tr_host_gemm, 9},                  \
	{"trajring_bias_relu", tr_host_bias_relu, 5},        \
	{"trajring_relu_grad", tr_host_relu_grad, 3},        \
	{"trajring_col_sum", tr_host_col_sum, 4},            \
	{"trajring_td_loss", tr_host_td_loss, 15},           \
	{"trajring_norm_partial", tr_host_norm_partial, 4},  \
	{"trajring_norm_finish", tr_host_norm_finish, 5},    \
	{"trajring_adam", tr_host_adam, 15},                 \
	{"trajring_argmax", tr_host_argmax, 4},              \
	{"trajring_gemm3", tr_host_gemm3, 16},               \
	{"trajring_gemm_back", tr_host_gemm_back, 15},       \
	{"trajring_td_head", tr_host_td_head, 6},

#endif /* TRAJRING_LEARNER_HOST_H */
