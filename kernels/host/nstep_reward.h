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
 * double on its own (no fused multiply-add: rn.h), and the sum is rounded
 * once to float, so device, host build and cpu reference agree bit for
 * bit.
 * win.start may be absolute or already the slot (start % capacity);
 * 0 <= len <= capacity, so slot+j wraps at most once.
 */
#ifndef TRAJRING_NSTEP_REWARD_H
#define TRAJRING_NSTEP_REWARD_H
#include "kernels.h"
#include "rn.h"

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
#endif
