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
 *
 * A launch replayed from a CUDA graph cannot take per-step constants as
 * parameters (a graph freezes them at capture), so with a hyper block
 * (trajring_adam's last argument, not null) neglr, c1 and c2 come from
 * device memory instead, u64 words:
 *
 *	[0] t, the Adam steps taken: the launch takes step t+1 and, once
 *	    every thread has read t, its last block sets t+1
 *	[1] tickets: threads finished (0 before and after a launch)
 *	[2] float32 bits of neglr (low half)
 *	[3] n >= 1, the table's entries
 *	[4+i] float32 bits of c1 (low half) and c2 (high half) of step i+1;
 *	    steps past n take entry n-1 (the caller makes n the first step
 *	    whose c1 and c2 are both 1, which they stay)
 *
 * The caller computes the table with the host expressions above, so the
 * constants are the same bits as passed by value.
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

/* The hyper block's words (see above). */
#define TR_ADAM_HYPER_T 0
#define TR_ADAM_HYPER_TICKETS 1
#define TR_ADAM_HYPER_NEGLR 2
#define TR_ADAM_HYPER_N 3
#define TR_ADAM_HYPER_TABLE 4

/* tr_adam_f32 returns the float32 whose bits are the low half of w. */
TR_HD float tr_adam_f32(tr_u64 w)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
	return __uint_as_float((unsigned int)w);
#else
	union {
		tr_u32 u;
		float f;
	} x;
	x.u = (tr_u32)w;
	return x.f;
#endif
}

/* tr_adam_hyper reads the step count t (which the launch's last block
 * writes: through an atomic load, never the read-only path) and the
 * constants of step t+1 from the hyper block h. */
TR_HD tr_u64 tr_adam_hyper(tr_u64 *h, float *neglr, float *c1, float *c2)
{
	tr_u64 t = tr_atomic_load_u64(h + TR_ADAM_HYPER_T), n = TR_LD(tr_u64, h + TR_ADAM_HYPER_N), e;
	tr_u64 i = t + 1 < n ? t : n - 1;
	e = TR_LD(tr_u64, h + TR_ADAM_HYPER_TABLE + i);
	*neglr = tr_adam_f32(TR_LD(tr_u64, h + TR_ADAM_HYPER_NEGLR));
	*c1 = tr_adam_f32(e);
	*c2 = tr_adam_f32(e >> 32);
	return t;
}

/* tr_adam_advance hands in the tickets of threads threads (of total in
 * the launch) that have read t: the call that hands in the last sets the
 * step count to t+1 and the tickets back to 0. */
TR_HD void tr_adam_advance(tr_u64 *h, tr_u64 t, tr_u64 threads, tr_u64 total)
{
	tr_fence();
	if (tr_atomic_add_u64(h + TR_ADAM_HYPER_TICKETS, threads) + threads != total)
		return;
	tr_fence();
	tr_atomic_exch_u64(h + TR_ADAM_HYPER_T, t + 1);
	tr_atomic_exch_u64(h + TR_ADAM_HYPER_TICKETS, 0);
}

TR_STRICT_END
#endif /* TRAJRING_ADAM_H */
