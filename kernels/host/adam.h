/*
 * adam.h: one thread's share of trajring_adam, an Adam step over float32
 * parameters w with gradients g and moments m and v [n], the gradient
 * first multiplied by *scale (the clipping factor of grad_norm.h; scale ==
 * 0: no clipping), grid-stride. The constants are float32 values computed
 * by the caller as agents/dqn's adam does: b1, b2, omb1 = 1-b1, omb2 =
 * 1-b2, eps, neglr = -lr, c1 = 1/(1-beta1^t), c2 = 1/(1-beta2^t).
 * Reference loop (kernels/host.RefAdam), every operation on float32:
 *
 *	for j := range w {
 *		gj := g[j]
 *		if scale != nil {
 *			gj = gj * scale[0]
 *		}
 *		t1 := gj * omb1
 *		g2 := float32(gj*gj) * omb2
 *		m[j] = float32(m[j]*b1) + t1
 *		v[j] = float32(v[j]*b2) + g2
 *		mh := float32(m[j]*c1) * neglr
 *		vh := float32(math.Sqrt(float64(float32(v[j]*c2)))) + eps
 *		w[j] = w[j] + mh/vh
 *	}
 *
 * which is agents/dqn's adam.step on the clipped gradient, operation for
 * operation (the gradient is left as it is: the learner overwrites it).
 * Every operation is rounded on its own (rnf.h), so the builds agree bit
 * for bit.
 */
#ifndef TRAJRING_ADAM_H
#define TRAJRING_ADAM_H
#include "kernels.h"
#include "rnf.h"

TR_STRICT_BEGIN

TR_HD void tr_adam_run(float *w, const float *g, float *m, float *v, tr_i64 n, const float *scale, float b1, float b2,
		       float omb1, float omb2, float eps, float neglr, float c1, float c2, tr_i64 tid, tr_i64 nthreads)
{
	float s = scale != 0 ? TR_LD(float, scale) : 1.0f;
	tr_i64 j;
	for (j = tid; j < n; j += nthreads) {
		float gj = TR_LD(float, g + j), t1, g2, mj, vj, mh, vh;
		if (scale != 0)
			gj = TR_FMUL(gj, s);
		t1 = TR_FMUL(gj, omb1);
		g2 = TR_FMUL(TR_FMUL(gj, gj), omb2);
		mj = TR_FADD(TR_FMUL(m[j], b1), t1);
		vj = TR_FADD(TR_FMUL(v[j], b2), g2);
		m[j] = mj;
		v[j] = vj;
		mh = TR_FMUL(TR_FMUL(mj, c1), neglr);
		vh = TR_FADD(TR_FSQRT(TR_FMUL(vj, c2)), eps);
		w[j] = TR_FADD(w[j], TR_FDIV(mh, vh));
	}
}

TR_STRICT_END
#endif /* TRAJRING_ADAM_H */
