// trajring_gemm3 computes up to three products of one shape in one
// launch: C_p = op(A_p)·op(B_p) (+ C_p with TR_GEMM_ACC) for each p whose
// c_p is not null, with the epilogues flags asks for (host/gemm.h): e_p
// is product p's bias (TR_GEMM_BIAS, float [n]) or, without a bias, the
// ReLU gradient's y (TR_GEMM_DRELU, float [m, n]). Every element is
// trajring_gemm's for the same product bit for bit (the same tile code):
// the learner's three forward passes of a layer (online on s and s',
// target on s') in one launch. Blocks of TR_GEMM_THREADS threads stride
// over the products' tiles (tr_gemm3_pick); a block of another size does
// nothing. y is unused (1).
#include "host/gemm.h"

extern "C" __global__ void trajring_gemm3(const float *a0, const float *b0, float *c0, const float *e0, const float *a1,
					  const float *b1, float *c1, const float *e1, const float *a2, const float *b2, float *c2,
					  const float *e2, tr_i64 m, tr_i64 n, tr_i64 k, tr_i64 flags)
{
	__shared__ float as[TR_GEMM_T * TR_GEMM_TS], bs[TR_GEMM_T * TR_GEMM_TS];
	tr_i64 tiles = tr_gemm_tiles(m, n), total, tile, local = 0;
	const float *bias = 0, *y = 0;
	if (blockDim.x != TR_GEMM_THREADS)
		return;
	total = tiles * ((c0 != 0) + (c1 != 0) + (c2 != 0));
	for (tile = blockIdx.x; tile < total; tile += gridDim.x) {
		int p = tr_gemm3_pick(tile, tiles, c0, c1, c2, &local);
		const float *a = p == 0 ? a0 : p == 1 ? a1 : a2, *b = p == 0 ? b0 : p == 1 ? b1 : b2;
		const float *e = p == 0 ? e0 : p == 1 ? e1 : e2;
		float *c = p == 0 ? c0 : p == 1 ? c1 : c2;
		bias = (flags & TR_GEMM_BIAS) ? e : 0;
		y = (flags & TR_GEMM_BIAS) ? 0 : e;
		tr_gemm_tile_dev(a, b, c, m, n, k, flags, bias, y, local, as, bs);
	}
}
