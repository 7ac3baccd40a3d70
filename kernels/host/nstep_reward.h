/*
 * nstep_reward.h: one thread's share of the n-step reward sums. Reference
 * loop (package cpu, Backend.NStepReward), ring of float32 shaped
 * [rows, capacity] whose element ix is at byte ix*stride (the reward of a
 * packed record; stride 4 for a ring of rewards alone, and ring points at
 * the reward of step 0):
 *
 *	for i, w := range wins {
 *		s, g := 0.0, 1.0
 *		for j := int64(0); j < w.Len; j++ {
 *			ix := w.Row*capacity + (w.Start+j)%capacity
 *			s = float64(s + float64(g*float64(ring[ix])))
 *			g = float64(g * gamma)
 *		}
 *		out[i] = float32(s)
 *	}
 *
 * One thread per window, grid-stride. Every product and sum is rounded to
 * double on its own (no fused multiply-add), and the sum is rounded once
 * to float, so device, host build and cpu reference agree bit for bit.
 * win.start may be absolute or already the slot (start % capacity);
 * 0 <= len <= capacity, so slot+j wraps at most once.
 */
#ifndef TRAJRING_NSTEP_REWARD_H
#define TRAJRING_NSTEP_REWARD_H
#include "kernels.h"

#ifdef __CUDACC__
#define tr_dadd_rn __dadd_rn
#define tr_dmul_rn __dmul_rn
#define tr_d2f_rn __double2float_rn
#else
/* The host build must not contract a product and the sum it feeds into a
 * fused multiply-add either (gcc does, across statements, under its
 * default -ffp-contract=fast whenever the target has FMA). Contraction is
 * switched off for this header, and the operations are out of line as
 * well (a returned double is rounded), for compilers that ignore both
 * pragmas. cgo does not accept -ffp-contract=off as a flag. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#define TR_NSTEP_POP_OPTIONS
#endif
__attribute__((noinline)) static double tr_dadd_rn(double a, double b)
{
	return a + b;
}
__attribute__((noinline)) static double tr_dmul_rn(double a, double b)
{
	return a * b;
}
static inline float tr_d2f_rn(double a)
{
	return (float)a;
}
#endif

TR_HD void tr_nstep_reward_run(const float *ring, float *out, const tr_win *wins, tr_i64 n, tr_i64 capacity, double gamma, tr_i64 stride, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i;
	for (i = tid; i < n; i += nthreads) {
		tr_i64 p = TR_LD(tr_i64, &wins[i].start);
		tr_i64 len = TR_LD(tr_i64, &wins[i].len);
		const char *row = (const char *)ring + TR_LD(tr_i64, &wins[i].row) * capacity * stride;
		double s = 0.0, g = 1.0;
		tr_i64 j;
		if (p >= capacity)
			p %= capacity;
		for (j = 0; j < len; j++) {
			s = tr_dadd_rn(s, tr_dmul_rn(g, (double)TR_LD(float, row + p * stride)));
			g = tr_dmul_rn(g, gamma);
			if (++p == capacity)
				p = 0;
		}
		out[i] = tr_d2f_rn(s);
	}
}

#ifdef TR_NSTEP_POP_OPTIONS
#pragma GCC pop_options
#undef TR_NSTEP_POP_OPTIONS
#endif
#endif
