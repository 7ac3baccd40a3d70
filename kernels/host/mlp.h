/*
 * mlp.h: one thread's share of the elementwise layers of a ReLU MLP, on
 * row-major float32 [rows, cols] matrices, grid-stride, one thread per
 * element (per column for the column sums, per row for argmax). Reference
 * loops (kernels/host.RefBiasReLU, RefReLUGrad, RefArgmax, RefColSum):
 *
 *	// trajring_bias_relu: z = z + bias (broadcast over rows), then ReLU
 *	for i := range rows {
 *		for j := range cols {
 *			v := z[i*cols+j] + bias[j]
 *			if relu && v < 0 {
 *				v = 0
 *			}
 *			z[i*cols+j] = v
 *		}
 *	}
 *	// trajring_relu_grad: the gradient through a ReLU whose output was y
 *	for i := range dy {
 *		if !(y[i] > 0) {
 *			dy[i] = 0
 *		}
 *	}
 *	// trajring_argmax: each row's first largest column, the greedy action
 *	for i := range rows {
 *		best := 0
 *		for j := 1; j < cols; j++ {
 *			if x[i*cols+j] > x[i*cols+best] {
 *				best = j
 *			}
 *		}
 *		out[i] = int64(best)
 *	}
 *	// trajring_col_sum: the bias gradient, each column summed in row order
 *	for j := range cols {
 *		s := float32(0)
 *		for i := range rows {
 *			s += x[i*cols+j]
 *		}
 *		out[j] = s
 *	}
 *
 * Each sum is rounded to float on its own, so the builds agree bit for
 * bit. bias_relu and relu_grad work in place (each thread reads and writes
 * its own elements only).
 */
#ifndef TRAJRING_MLP_H
#define TRAJRING_MLP_H
#include "kernels.h"
#include "rnf.h"

TR_STRICT_BEGIN

TR_HD void tr_bias_relu_run(float *z, const float *bias, tr_i64 rows, tr_i64 cols, tr_i64 relu, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 n = rows * cols, i;
	for (i = tid; i < n; i += nthreads) {
		float v = TR_FADD(z[i], TR_LD(float, bias + i % cols));
		if (relu && v < 0.0f)
			v = 0.0f;
		z[i] = v;
	}
}

TR_HD void tr_relu_grad_run(float *dy, const float *y, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i;
	for (i = tid; i < n; i += nthreads)
		if (!(TR_LD(float, y + i) > 0.0f))
			dy[i] = 0.0f;
}

TR_HD void tr_col_sum_run(const float *x, float *out, tr_i64 rows, tr_i64 cols, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 j, i;
	for (j = tid; j < cols; j += nthreads) {
		float s = 0.0f;
		for (i = 0; i < rows; i++)
			s = TR_FADD(s, TR_LD(float, x + i * cols + j));
		out[j] = s;
	}
}

TR_HD void tr_argmax_run(const float *x, tr_i64 *out, tr_i64 rows, tr_i64 cols, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i, j;
	for (i = tid; i < rows; i += nthreads) {
		const float *r = x + i * cols;
		tr_i64 best = 0;
		for (j = 1; j < cols; j++)
			if (TR_LD(float, r + j) > TR_LD(float, r + best))
				best = j;
		out[i] = best;
	}
}

TR_STRICT_END
#endif /* TRAJRING_MLP_H */
