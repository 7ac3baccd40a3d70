/*
 * grad_norm.h: the global gradient norm and its clipping factor, in two
 * launches whose result does not depend on the grid: trajring_norm_partial
 * writes parts partial sums of squares (one thread per partial,
 * grid-stride), and trajring_norm_finish, launched as one block, adds them
 * on thread 0. Reference loop (kernels/host.RefGradNorm), in float64:
 *
 *	for p := range parts {
 *		s := 0.0
 *		for i := p; i < n; i += parts {
 *			s = s + float64(g[i])*float64(g[i])
 *		}
 *		partial[p] = s
 *	}
 *	t := 0.0
 *	for p := range parts {
 *		t = t + partial[p]
 *	}
 *	norm[0] = math.Sqrt(t)
 *	scale[0] = 1 // float32
 *	if norm[0] > maxNorm {
 *		scale[0] = float32(maxNorm / (norm[0] + 1e-6))
 *	}
 *
 * Every product and sum is rounded to double on its own (rn.h), so the
 * builds agree bit for bit. The scale is that of the CPU learner
 * (agents/dqn's Train); its norm adds the squares in another order, so
 * the two norms may differ in the last bits.
 */
#ifndef TRAJRING_GRAD_NORM_H
#define TRAJRING_GRAD_NORM_H
#include "kernels.h"
#include "rn.h"
#include "rnf.h"

TR_STRICT_BEGIN

TR_HD void tr_norm_partial_run(const float *g, tr_i64 n, tr_i64 parts, double *partial, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 p, i;
	for (p = tid; p < parts; p += nthreads) {
		double s = 0.0;
		for (i = p; i < n; i += parts) {
			double v = (double)TR_LD(float, g + i);
			s = tr_dadd_rn(s, tr_dmul_rn(v, v));
		}
		partial[p] = s;
	}
}

/* tr_norm_store writes the norm of the sum of squares t and its clipping
 * factor. */
TR_HD void tr_norm_store(double t, double maxnorm, double *norm, float *scale)
{
	double nm = TR_DSQRT(t);
	norm[0] = nm;
	scale[0] = nm > maxnorm ? tr_d2f_rn(TR_DDIV(maxnorm, tr_dadd_rn(nm, 1e-6))) : 1.0f;
}

/* tr_norm_finish_run does the whole second pass on thread 0. */
TR_HD void tr_norm_finish_run(const double *partial, tr_i64 parts, double maxnorm, double *norm, float *scale, tr_i64 tid)
{
	double t = 0.0;
	tr_i64 p;
	if (tid != 0)
		return;
	for (p = 0; p < parts; p++)
		t = tr_dadd_rn(t, TR_LD(double, partial + p));
	tr_norm_store(t, maxnorm, norm, scale);
}

/*
 * The norm in the launch that writes the last gradients
 * (trajring_gemm_back): its last block to finish computes every partial
 * (thread t: partials t, t+blockDim, ...) and then, on thread 0, adds
 * them and writes the norm, each sum exactly as above, so the results are
 * trajring_norm_partial's and trajring_norm_finish's bit for bit. It
 * reads what other blocks of the same launch wrote, so it loads through
 * TR_LDCG (L2, coherent after their fences), never TR_LD's read-only
 * cache. The state is a counter of finished blocks (zero before and
 * after the launch), the norm, the factor and the partials:
 */
#define TR_NORM_STATE_NORM 8     /* double: the norm */
#define TR_NORM_STATE_SCALE 16   /* float: the clipping factor */
#define TR_NORM_STATE_PARTIAL 24 /* double [parts]: the partial sums */

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
#define TR_LDCG(T, p) __ldcg((const T *)(p))
#else
#define TR_LDCG(T, p) (*(const T *)(p))
#endif

/* tr_norm_part returns partial p of g (tr_norm_partial_run's sum). */
TR_HD double tr_norm_part(const float *g, tr_i64 n, tr_i64 parts, tr_i64 p)
{
	double s = 0.0;
	tr_i64 i;
	for (i = p; i < n; i += parts) {
		double v = (double)TR_LDCG(float, g + i);
		s = tr_dadd_rn(s, tr_dmul_rn(v, v));
	}
	return s;
}

/* tr_norm_state_finish adds the state's partials in order and writes its
 * norm and factor (tr_norm_finish_run's sums), then zeroes its counter. */
TR_HD void tr_norm_state_finish(tr_u64 *state, tr_i64 parts, double maxnorm)
{
	const double *partial = (const double *)((char *)state + TR_NORM_STATE_PARTIAL);
	double t = 0.0;
	tr_i64 p;
	for (p = 0; p < parts; p++)
		t = tr_dadd_rn(t, TR_LDCG(double, partial + p));
	tr_norm_store(t, maxnorm, (double *)((char *)state + TR_NORM_STATE_NORM), (float *)((char *)state + TR_NORM_STATE_SCALE));
	state[0] = 0;
}

TR_STRICT_END
#endif /* TRAJRING_GRAD_NORM_H */
