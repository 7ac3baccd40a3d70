// trajring_td_head computes a DQN learner's last layer on s and s' and its
// TD loss in one launch: the products Q(s,·) = x0·w + b, Q(s',·) = x1·w + b
// (online, unless x1 is 0) and x2·wt + bt (target) as trajring_gemm3 does
// (host/gemm.h: each element trajring_gemm's bit for bit), then the last
// block to finish (a ticket after a fence) computes trajring_td_loss's
// outputs for every transition (host/td_loss.h), reading the Q-values
// the other blocks wrote through coherent loads. Everything but the
// batch's operands comes from the descriptor d (TR_TDH_*), whose count of
// finished blocks is 0 before and after. Blocks of TR_GEMM_THREADS
// threads stride over the tiles; a block of another size does nothing.
// y is unused (1).
#include "host/kernels.h"
#if defined(__CUDA_ARCH__)
#define TR_TD_LDQ(T, p) __ldcg((const T *)(p))
#endif
#include "host/td_loss.h"
#include "host/gemm.h"

extern "C" __global__ void trajring_td_head(tr_u64 *d, const tr_i64 *act, const float *rew, const float *disc, const double *w,
					    const tr_u8 *valid)
{
	__shared__ float as[TR_GEMM_T * TR_GEMM_TS], bs[TR_GEMM_T * TR_GEMM_TS];
	__shared__ int last;
	const float *x0 = (const float *)d[TR_TDH_X0], *x1 = (const float *)d[TR_TDH_X1], *x2 = (const float *)d[TR_TDH_X2];
	const float *wo = (const float *)d[TR_TDH_W], *bo = (const float *)d[TR_TDH_B];
	const float *wt = (const float *)d[TR_TDH_WT], *bt = (const float *)d[TR_TDH_BT];
	float *q = (float *)d[TR_TDH_Q], *qno = (float *)d[TR_TDH_QNO], *qnt = (float *)d[TR_TDH_QNT];
	tr_i64 bsz = (tr_i64)d[TR_TDH_BSZ], k = (tr_i64)d[TR_TDH_K], na = (tr_i64)d[TR_TDH_NA], tiles, total, tile, local = 0;
	double eps = ((const double *)d)[TR_TDH_EPS];
	int t = threadIdx.x;
	if (blockDim.x != TR_GEMM_THREADS)
		return;
	tiles = tr_gemm_tiles(bsz, na);
	total = tiles * (2 + (qno != 0));
	for (tile = blockIdx.x; tile < total; tile += gridDim.x) {
		int p = tr_gemm3_pick(tile, tiles, q, qno, qnt, &local);
		tr_gemm_tile_dev(p == 0 ? x0 : p == 1 ? x1 : x2, p == 2 ? wt : wo, p == 0 ? q : p == 1 ? qno : qnt, bsz, na, k, TR_GEMM_BIAS,
				 p == 2 ? bt : bo, 0, local, as, bs);
	}
	tr_fence();
	__syncthreads();
	if (t == 0) {
		tr_fence();
		last = tr_atomic_add_u64(d + TR_TDH_COUNT, 1) == (tr_u64)gridDim.x - 1;
		if (last)
			tr_atomic_exch_u64(d + TR_TDH_COUNT, 0);
	}
	__syncthreads();
	if (!last)
		return;
	tr_fence();
	tr_td_loss_run(q, qno, qnt, act, rew, disc, w, valid, bsz, na, eps, (float *)d[TR_TDH_DQ], (float *)d[TR_TDH_TD],
		       (float *)d[TR_TDH_PRIO], (float *)d[TR_TDH_RL], t, blockDim.x);
}
