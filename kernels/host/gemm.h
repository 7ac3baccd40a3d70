/*
 * gemm.h: one block's share of trajring_gemm, C = op(A)·op(B) (+ C), on
 * row-major float32 matrices: op(A) is m×k (A stored m×k, or k×m when
 * TR_GEMM_TA is set), op(B) k×n (B stored k×n, or n×k with TR_GEMM_TB), C
 * m×n. Reference loop (kernels/host.RefGemm):
 *
 *	for i := range m {
 *		for j := range n {
 *			s := float32(0)
 *			if acc {
 *				s = c[i*n+j]
 *			}
 *			for l := range k {
 *				s = s + float32(opA(i, l)*opB(l, j))
 *			}
 *			c[i*n+j] = s
 *		}
 *	}
 *
 * Every product and sum is rounded to float on its own, in that order
 * (rnf.h), so the device, the host build and the reference agree bit for
 * bit; gonum's float32 Gemm without transposes adds in the same order.
 * Then the epilogues (TR_GEMM_BIAS, TR_GEMM_RELU, TR_GEMM_DRELU) apply
 * bias+ReLU or the ReLU gradient to the finished element, as
 * trajring_bias_relu and trajring_relu_grad would in launches of their
 * own.
 *
 * Blocks of TR_GEMM_THREADS threads stride over the TR_GEMM_T×TR_GEMM_T
 * tiles of C, one thread per element of a tile. For each slice of
 * TR_GEMM_T values of k the block loads a tile of op(A) and one of op(B)
 * into shared memory (tr_gemm_load, each thread one element of each,
 * coalesced for either storage order), then each thread adds its row of
 * one times its column of the other (tr_gemm_mac): the two phases are
 * separated by __syncthreads on the device, and the host build runs each
 * phase for every thread of the block before the next (tr_host_gemm,
 * learner_host.h), so the race-exposure mode, which runs a block's first
 * unit of threads as the whole block, keeps every block whole.
 */
#ifndef TRAJRING_GEMM_H
#define TRAJRING_GEMM_H
#include "kernels.h"
#include "rnf.h"

#define TR_GEMM_T 16
#define TR_GEMM_TS (TR_GEMM_T + 1) /* padded row of a shared tile: no bank conflicts on transposed loads */
#define TR_GEMM_THREADS (TR_GEMM_T * TR_GEMM_T)
#define TR_GEMM_TA 1  /* A is stored k×m */
#define TR_GEMM_TB 2  /* B is stored n×k */
#define TR_GEMM_ACC 4 /* add to C instead of overwriting it */
/* Epilogues, applied to each element of C after its last sum, in this
 * order, each exactly as its own kernel would (mlp.h): bit for bit what
 * trajring_gemm followed by trajring_bias_relu or trajring_relu_grad
 * writes, in one launch. */
#define TR_GEMM_BIAS 8   /* add bias[j] (tr_bias_relu_run's add) */
#define TR_GEMM_RELU 16  /* then set negative results to 0 */
#define TR_GEMM_DRELU 32 /* set C[i,j] to 0 where !(y[i,j] > 0) (tr_relu_grad_run) */
/* TR_GEMM_ONES: op(A) is an m×k matrix of ones and A is not read; with m
 * = 1, C is the column sums of op(B) added in row order from 0, bit for
 * bit trajring_col_sum's (1*x is x exactly). */
#define TR_GEMM_ONES 64

TR_STRICT_BEGIN

/* tr_gemm_tiles returns the number of tiles of an m×n C. */
TR_HD tr_i64 tr_gemm_tiles(tr_i64 m, tr_i64 n)
{
	return ((m + TR_GEMM_T - 1) / TR_GEMM_T) * ((n + TR_GEMM_T - 1) / TR_GEMM_T);
}

/* tr_gemm_origin returns the first row and column of tile `tile`
 * (row-major over tiles). */
TR_HD void tr_gemm_origin(tr_i64 tile, tr_i64 n, tr_i64 *i0, tr_i64 *j0)
{
	tr_i64 tn = (n + TR_GEMM_T - 1) / TR_GEMM_T;
	*i0 = tile / tn * TR_GEMM_T;
	*j0 = tile % tn * TR_GEMM_T;
}

/* tr_gemm_load stores thread t's element of the op(A) tile (rows i0..,
 * columns k0..) in as and of the op(B) tile (rows k0.., columns j0..) in
 * bs, 0 outside the matrices. Consecutive threads read consecutive
 * addresses in either storage order. */
TR_HD void tr_gemm_load(const float *a, const float *b, tr_i64 m, tr_i64 n, tr_i64 k, tr_i64 flags, tr_i64 i0, tr_i64 j0,
			tr_i64 k0, int t, float *as, float *bs)
{
	int lo = t % TR_GEMM_T, hi = t / TR_GEMM_T, r, c;
	tr_i64 i, l, j;
	float v;
	/* op(A)(i, l): A[i*k + l], or A[l*m + i] transposed */
	if (flags & TR_GEMM_TA)
		r = lo, c = hi;
	else
		r = hi, c = lo;
	i = i0 + r, l = k0 + c, v = 0.0f;
	if (i < m && l < k)
		v = (flags & TR_GEMM_ONES) ? 1.0f : TR_LD(float, (flags & TR_GEMM_TA) ? a + l * m + i : a + i * k + l);
	as[r * TR_GEMM_TS + c] = v;
	/* op(B)(l, j): B[l*n + j], or B[j*k + l] transposed */
	if (flags & TR_GEMM_TB)
		r = lo, c = hi;
	else
		r = hi, c = lo;
	l = k0 + r, j = j0 + c, v = 0.0f;
	if (l < k && j < n)
		v = TR_LD(float, (flags & TR_GEMM_TB) ? b + j * k + l : b + l * n + j);
	bs[r * TR_GEMM_TS + c] = v;
}

/* tr_gemm_init returns thread t's starting sum: its element of C with
 * TR_GEMM_ACC (read with a plain load: the launch writes C), else 0. */
TR_HD float tr_gemm_init(const float *c, tr_i64 m, tr_i64 n, tr_i64 flags, tr_i64 i0, tr_i64 j0, int t)
{
	tr_i64 i = i0 + t / TR_GEMM_T, j = j0 + t % TR_GEMM_T;
	if ((flags & TR_GEMM_ACC) && i < m && j < n)
		return c[i * n + j];
	return 0.0f;
}

/* tr_gemm_mac adds the first kn products of thread t's row of as and
 * column of bs to s, in order. */
TR_HD float tr_gemm_mac(float s, const float *as, const float *bs, tr_i64 kn, int t)
{
	const float *ar = as + (t / TR_GEMM_T) * TR_GEMM_TS, *bc = bs + t % TR_GEMM_T;
	tr_i64 l;
	for (l = 0; l < kn; l++)
		s = TR_FADD(s, TR_FMUL(ar[l], bc[l * TR_GEMM_TS]));
	return s;
}

/* tr_gemm_store writes thread t's sum to C when it lies inside, through
 * the epilogues flags asks for (bias: float [n]; y: float [m, n]). */
TR_HD void tr_gemm_store(float *c, tr_i64 m, tr_i64 n, tr_i64 i0, tr_i64 j0, int t, float s, tr_i64 flags, const float *bias,
			 const float *y)
{
	tr_i64 i = i0 + t / TR_GEMM_T, j = j0 + t % TR_GEMM_T;
	if (i >= m || j >= n)
		return;
	if (flags & TR_GEMM_BIAS) {
		s = TR_FADD(s, TR_LD(float, bias + j));
		if ((flags & TR_GEMM_RELU) && s < 0.0f)
			s = 0.0f;
	}
	if ((flags & TR_GEMM_DRELU) && !(TR_LD(float, y + i * n + j) > 0.0f))
		s = 0.0f;
	c[i * n + j] = s;
}

/* tr_gemm3_pick returns, for tile `tile` of a trajring_gemm3 launch (up
 * to three products of one shape, m×n, tiles each: the tiles of the
 * first product whose C is not null, then the second's, then the
 * third's), the index of its product (0-2) and its tile within that
 * product; -1 past the last tile. */
TR_HD int tr_gemm3_pick(tr_i64 tile, tr_i64 tiles, const void *c0, const void *c1, const void *c2, tr_i64 *local)
{
	const void *cs[3] = {c0, c1, c2};
	int p;
	for (p = 0; p < 3; p++) {
		if (cs[p] == 0)
			continue;
		if (tile < tiles) {
			*local = tile;
			return p;
		}
		tile -= tiles;
	}
	return -1;
}

/* tr_gemm_back_tiles returns the tiles of a trajring_gemm_back launch
 * for a layer of k inputs and n outputs on a batch of bsz rows: dW (k×n),
 * then db (1×n), then dX (bsz×k) unless dx is null. */
TR_HD tr_i64 tr_gemm_back_tiles(tr_i64 bsz, tr_i64 k, tr_i64 n, const void *dx)
{
	return tr_gemm_tiles(k, n) + tr_gemm_tiles(1, n) + (dx != 0 ? tr_gemm_tiles(bsz, k) : 0);
}

/* tr_gemm_back_pick sets the product of tile `tile` of a
 * trajring_gemm_back launch (tr_gemm_back_tiles) and returns its tile
 * within that product:
 *   dW = x^T·dz:        A = x [bsz, k] (TA), B = dz [bsz, n], C = gw, m = k, n, K = bsz
 *   db = ones(1,bsz)·dz: ONES, B = dz, C = gb, m = 1, n, K = bsz (trajring_col_sum's sums)
 *   dX = dz·w^T, then through the ReLU of y: A = dz, B = w [k, n] (TB),
 *                        C = dx, m = bsz, n = k, K = n, DRELU with y (none when y is null) */
TR_HD tr_i64 tr_gemm_back_pick(tr_i64 tile, const float *x, const float *dz, const float *w, const float *y, float *gw, float *gb,
			       float *dx, tr_i64 bsz, tr_i64 k, tr_i64 n, const float **pa, const float **pb, float **pc,
			       tr_i64 *pm, tr_i64 *pn, tr_i64 *pk, tr_i64 *pflags)
{
	tr_i64 tw = tr_gemm_tiles(k, n), tb = tr_gemm_tiles(1, n);
	if (tile < tw) {
		*pa = x, *pb = dz, *pc = gw, *pm = k, *pn = n, *pk = bsz, *pflags = TR_GEMM_TA;
		return tile;
	}
	tile -= tw;
	if (tile < tb) {
		*pa = 0, *pb = dz, *pc = gb, *pm = 1, *pn = n, *pk = bsz, *pflags = TR_GEMM_ONES;
		return tile;
	}
	tile -= tb;
	*pa = dz, *pb = w, *pc = dx, *pm = bsz, *pn = k, *pk = n, *pflags = TR_GEMM_TB | (y != 0 ? TR_GEMM_DRELU : 0);
	return tile;
}

TR_STRICT_END

#if defined(__CUDACC__)
/* tr_gemm_tile_dev computes tile `tile` of C = op(A)·op(B) with its
 * epilogues on the calling block of TR_GEMM_THREADS threads, through the
 * shared tiles as and bs: trajring_gemm's loop body. */
__device__ __forceinline__ void tr_gemm_tile_dev(const float *a, const float *b, float *c, tr_i64 m, tr_i64 n, tr_i64 k, tr_i64 flags,
						 const float *bias, const float *y, tr_i64 tile, float *as, float *bs)
{
	tr_i64 k0, i0, j0;
	int t = threadIdx.x;
	float s;
	tr_gemm_origin(tile, n, &i0, &j0);
	s = tr_gemm_init(c, m, n, flags, i0, j0, t);
	for (k0 = 0; k0 < k; k0 += TR_GEMM_T) {
		tr_i64 kn = k - k0 < TR_GEMM_T ? k - k0 : TR_GEMM_T;
		tr_gemm_load(a, b, m, n, k, flags, i0, j0, k0, t, as, bs);
		__syncthreads();
		s = tr_gemm_mac(s, as, bs, kn, t);
		__syncthreads();
	}
	tr_gemm_store(c, m, n, i0, j0, t, s, flags, bias, y);
}
#endif

#endif /* TRAJRING_GEMM_H */
