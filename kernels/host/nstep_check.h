/*
 * nstep_check.h: one thread's share of the n-step check of drawn table
 * items (trajring_nstep_check). A table that selects on the device keeps
 * a mirror of the buffer's per-step metadata byte (meta, [rows, capacity],
 * the host's layout: step type in bits 0-1, next step type in bits 2-3,
 * discount zero in bit 4, cut in bit 5) and of each row's write cursor
 * (cursors, absolute steps). For every drawn window (the draw kernels'
 * output: Start the slot, Len the item's length) it computes the n-step
 * length k exactly as the host's Buffer.nstepLen does, and writes the
 * windows and per-transition values the n-step materialisation reads.
 * Reference loop (package cpu, Backend.NStepCheck):
 *
 *	for i, w := range wins {
 *		at := func(j int64) uint8 { return meta[w.Row*capacity+(w.Start+j)%capacity] }
 *		k := int64(0)
 *		if m := at(0); m&3 != Last && m&cut == 0 {
 *			k = min(horizon, w.Len-1, (cursors[w.Row]-1-w.Start)%capacity)
 *			for j := int64(1); j <= k; j++ {
 *				if m := at(j-1); m&cut != 0 { k = j-1; break }
 *				else if (m>>2)&3 == Last { k = j; break }
 *			}
 *		}
 *		steps[i] = {w.Row, w.Start, k}
 *		cur[i] = {w.Row, w.Start, 1}
 *		next[i] = {w.Row, (w.Start+k)%capacity, 1}
 *		valid[i], disc[i], done[i], masked[i] = k > 0, 0, Running, 0
 *		if k > 0 {
 *			m := at(k-1)
 *			done[i] = Running, or Terminated (next Last, discount zero), or Truncated (next Last)
 *			g := 1.0; for range k { g = float64(g*gamma) }
 *			if done[i] != Terminated { disc[i] = float32(g) }
 *			masked[i] = float32(weights[i])
 *		}
 *	}
 *
 * The cursor distance holds because a drawn item's steps are stored:
 * its first step t has cursor-capacity <= t < cursor, so cursor-1-t is
 * (cursor-1-slot) mod capacity. One thread per window, grid-stride; every
 * output element is written by its own thread, and products are rounded
 * one by one (rn.h), so the device, the host build and the reference agree
 * bit for bit.
 */
#ifndef TRAJRING_NSTEP_CHECK_H
#define TRAJRING_NSTEP_CHECK_H
#include "rn.h"
#include "select.h" /* tr_mod */

#define TR_META_LAST 2
#define TR_META_DISCZERO 0x10
#define TR_META_CUT 0x20

TR_HD void tr_nstep_check_run(const tr_u8 *meta, const tr_i64 *cursors, tr_i64 capacity, tr_i64 horizon, double gamma, tr_i64 n,
			      const tr_win *wins, const double *weights, tr_win *steps, tr_win *cur, tr_win *next, tr_u8 *valid,
			      float *masked, float *disc, tr_u8 *done, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i;
	for (i = tid; i < n; i += nthreads) {
		tr_i64 row = TR_LD(tr_i64, &wins[i].row);
		tr_i64 s = TR_LD(tr_i64, &wins[i].start);
		tr_i64 len = TR_LD(tr_i64, &wins[i].len);
		const tr_u8 *rm = meta + row * capacity;
		tr_u8 m = TR_LD(tr_u8, &rm[s]);
		tr_i64 k = 0, j, p;
		if ((m & 3) != TR_META_LAST && (m & TR_META_CUT) == 0) {
			tr_i64 rem = tr_mod(TR_LD(tr_i64, &cursors[row]) - 1 - s, capacity);
			k = horizon < len - 1 ? horizon : len - 1;
			if (rem < k)
				k = rem;
			for (j = 1, p = s; j <= k; j++) {
				m = TR_LD(tr_u8, &rm[p]);
				if (m & TR_META_CUT) {
					k = j - 1;
					break;
				}
				if (((m >> 2) & 3) == TR_META_LAST) {
					k = j;
					break;
				}
				if (++p == capacity)
					p = 0;
			}
		}
		steps[i].row = row, steps[i].start = s, steps[i].len = k;
		cur[i].row = row, cur[i].start = s, cur[i].len = 1;
		p = s + k;
		if (p >= capacity)
			p -= capacity;
		next[i].row = row, next[i].start = p, next[i].len = 1;
		valid[i] = k > 0;
		if (k == 0) {
			disc[i] = 0.0f, done[i] = 0, masked[i] = 0.0f;
			continue;
		}
		p = s + k - 1;
		if (p >= capacity)
			p -= capacity;
		m = TR_LD(tr_u8, &rm[p]);
		done[i] = ((m >> 2) & 3) != TR_META_LAST ? 0 : (m & TR_META_DISCZERO) ? 1 : 2;
		if (done[i] == 1) {
			disc[i] = 0.0f;
		} else {
			double g = 1.0;
			for (j = 0; j < k; j++)
				g = tr_dmul_rn(g, gamma);
			disc[i] = tr_d2f_rn(g);
		}
		masked[i] = tr_d2f_rn(TR_LD(double, &weights[i]));
	}
}
#endif
