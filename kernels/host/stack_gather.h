/*
 * stack_gather.h: one thread's share of a frame-stack gather
 * (trajring_stack_gather): for each of n transitions, the K frames that
 * end at its current step (cur[i], Start the slot) and the K frames that
 * end at its next step (next[i]) of one observation column, read from
 * single frames in the ring. Frames before the episode's first step are
 * zeros (SB3's VecFrameStack, Dopamine's replay); so are frames before a
 * cut and before a row's first step. The episode edge is found from the
 * device mirror of the per-step metadata byte (meta, [rows, capacity]:
 * step type in bits 0-1, cut in bit 5) and the rows' cursors, as the
 * host's Buffer.stackReal finds it. Reference loop (package cpu,
 * Backend.StackGather), for y = 0 (current, to out) and y = 1 (next, to
 * nout; skipped when nout is 0):
 *
 *	for i := range n {
 *		w := wins_y[i]; t := the absolute step of slot w.Start (cursor-1 minus
 *		its distance back from the newest slot)
 *		real, lost := K, false
 *		for j := 1; j < K; j++ {
 *			p := t - j
 *			switch {
 *			case step type of p+1 is First, p < 0: real = j
 *			case p < cursor-capacity: real, lost = j, true
 *			case step p is cut: real = j
 *			}
 *			if real == j { break }
 *		}
 *		for f := range K {   // f = K-1 is step t
 *			dst := out_y[(i*K+f)*step:]
 *			if f < K-real { zero } else { copy ring[row, (w.Start-(K-1-f)) mod capacity] }
 *		}
 *		if y == 0 && lost && valid != 0 { valid[i] = 0; masked[i] = 0 }
 *	}
 *
 * K <= capacity, so slots wrap at most once. ring is the column's bytes
 * of ring step 0 (offset applied), stride the bytes between ring steps.
 * Groups of lanes share a frame (tr_group), as in the window gather.
 */
#ifndef TRAJRING_STACK_GATHER_H
#define TRAJRING_STACK_GATHER_H
#include "kernels.h"

#define TR_STACK_META_CUT 0x20

/* tr_stack_real returns how many of the K frames ending at slot s of row
 * row are real (the rest, before them, are zeros) and sets *lost when the
 * walk back reached a step the ring has overwritten. */
TR_HD tr_i64 tr_stack_real(const tr_u8 *meta, const tr_i64 *cursors, tr_i64 capacity, tr_i64 row, tr_i64 s, tr_i64 k, int *lost)
{
	tr_i64 c = TR_LD(tr_i64, &cursors[row]);
	tr_i64 newest = (c - 1) % capacity;
	tr_i64 back = newest - s;
	tr_i64 t, oldest, j;
	const tr_u8 *m = meta + row * capacity;
	if (back < 0)
		back += capacity;
	t = c - 1 - back;
	oldest = c > capacity ? c - capacity : 0;
	*lost = 0;
	for (j = 1; j < k; j++) {
		tr_i64 p = t - j;
		tr_i64 s1 = s - j + 1, s0;
		if (s1 < 0)
			s1 += capacity;
		if ((TR_LD(tr_u8, m + s1) & 3) == 0 || p < 0)
			return j;
		if (p < oldest) {
			*lost = 1;
			return j;
		}
		s0 = s1 - 1;
		if (s0 < 0)
			s0 += capacity;
		if (TR_LD(tr_u8, m + s0) & TR_STACK_META_CUT)
			return j;
	}
	return k;
}

TR_HD void tr_stack_gather_run(tr_u64 ring, tr_i64 stride, tr_i64 step, tr_u64 out, const tr_win *wins, tr_i64 n, tr_i64 k,
			       tr_i64 capacity, const tr_u8 *meta, const tr_i64 *cursors, tr_u8 *valid, float *masked, tr_i64 tid,
			       tr_i64 nthreads)
{
	int w = tr_width(ring | out | (tr_u64)step | (tr_u64)stride);
	tr_i64 words = step / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 k0 = tid & (g - 1);
	tr_i64 total = n * k;
	tr_i64 e;
	for (e = tid >> lg; e < total; e += nthreads >> lg) {
		tr_i64 i = tr_div(e, k);
		tr_i64 f = e - i * k;
		tr_i64 row = TR_LD(tr_i64, &wins[i].row);
		tr_i64 s = TR_LD(tr_i64, &wins[i].start);
		int lost;
		tr_i64 real = tr_stack_real(meta, cursors, capacity, row, s, k, &lost);
		tr_u64 dst = out + (tr_u64)(e * step);
		if (f < k - real) {
			tr_zero(dst, w, k0, words, g);
		} else {
			tr_i64 p = s - (k - 1 - f);
			if (p < 0)
				p += capacity;
			tr_copy(dst, ring + (tr_u64)((row * capacity + p) * stride), w, k0, words, g);
		}
		if (valid != 0 && lost && f == k - 1 && k0 == 0) {
			TR_ST(tr_u8, valid + i, (tr_u8)0);
			TR_ST(tr_u32, (tr_u32 *)(masked + i), (tr_u32)0);
		}
	}
}
#endif
