// trajring_gemm_back computes one dense layer's gradients in one launch
// (host/gemm.h, tr_gemm_back_pick): dW = x^T·dz into gw [k, n], db = the
// column sums of dz into gb [n] (trajring_col_sum's sums, as a product
// with ones), and, unless dx is null, dX = dz·w^T into dx [bsz, k],
// zeroed where !(y > 0) unless y is null (the ReLU gradient of the layer
// below); each element trajring_gemm's bit for bit. With state not null,
// the last block to finish then writes the global norm of the gradient g
// [ng] and its clipping factor to maxnorm into state (host/grad_norm.h),
// bit for bit what trajring_norm_partial and trajring_norm_finish with
// parts partials write. Blocks of TR_GEMM_THREADS threads stride over
// the tiles; a block of another size does nothing. y is unused (1).
#include "host/gemm.h"
#include "host/grad_norm.h"

extern "C" __global__ void trajring_gemm_back(const float *x, const float *dz, const float *w, const float *y, float *gw,
					      float *gb, float *dx, tr_i64 bsz, tr_i64 k, tr_i64 n, const float *g, tr_i64 ng,
					      tr_i64 parts, tr_u64 *state, double maxnorm)
{
	__shared__ float as[TR_GEMM_T * TR_GEMM_TS], bs[TR_GEMM_T * TR_GEMM_TS];
	__shared__ int last;
	tr_i64 total = tr_gemm_back_tiles(bsz, k, n, dx), tile, p;
	int t = threadIdx.x;
	if (blockDim.x != TR_GEMM_THREADS)
		return;
	for (tile = blockIdx.x; tile < total; tile += gridDim.x) {
		const float *a, *b;
		float *c;
		tr_i64 m_, n_, k_, flags, local;
		local = tr_gemm_back_pick(tile, x, dz, w, y, gw, gb, dx, bsz, k, n, &a, &b, &c, &m_, &n_, &k_, &flags);
		tr_gemm_tile_dev(a, b, c, m_, n_, k_, flags, 0, y, local, as, bs);
	}
	if (state == 0)
		return;
	/* The last block to finish: every thread's stores, then a fence and
	   the ticket (the pattern of CUDA's threadFenceReduction sample). */
	tr_fence();
	__syncthreads();
	if (t == 0) {
		tr_fence();
		last = tr_atomic_add_u64(state, 1) == (tr_u64)gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	tr_fence();
	for (p = t; p < parts; p += blockDim.x)
		((double *)((char *)state + TR_NORM_STATE_PARTIAL))[p] = tr_norm_part(g, ng, parts, p);
	tr_fence();
	__syncthreads();
	if (t == 0)
		tr_norm_state_finish(state, parts, maxnorm);
}
