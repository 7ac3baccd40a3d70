// trajring_gemm computes C = op(A)·op(B), or C += op(A)·op(B) with flag
// TR_GEMM_ACC, on row-major float32 matrices (host/gemm.h), then the
// epilogues flags asks for: + bias[j] (TR_GEMM_BIAS, bias float [n]) and
// ReLU (TR_GEMM_RELU), or the ReLU gradient through y (TR_GEMM_DRELU, y
// float [m, n]); bias and y may be 0 when unused. Blocks of
// TR_GEMM_THREADS threads (the gpu backend's 256) stride over the tiles of
// C, staging TR_GEMM_T-wide slices of A and B in shared memory; a block of
// another size does nothing. y is unused (1).
#include "host/gemm.h"

extern "C" __global__ void trajring_gemm(const float *a, const float *b, float *c, tr_i64 m, tr_i64 n, tr_i64 k, tr_i64 flags,
			      const float *bias, const float *y)
{
	__shared__ float as[TR_GEMM_T * TR_GEMM_TS], bs[TR_GEMM_T * TR_GEMM_TS];
	tr_i64 tiles = tr_gemm_tiles(m, n), tile;
	if (blockDim.x != TR_GEMM_THREADS)
		return;
	for (tile = blockIdx.x; tile < tiles; tile += gridDim.x)
		tr_gemm_tile_dev(a, b, c, m, n, k, flags, bias, y, tile, as, bs);
}
