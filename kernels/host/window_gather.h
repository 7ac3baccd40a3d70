/*
 * window_gather.h: one thread's share of a window gather with padding
 * and mask. Reference loop (package cpu), window b, step t, j = b*L+t:
 *
 *	if t < win[b].len {
 *		out[j*s : (j+1)*s] = ring[(row*capacity + (start+t)%capacity)*r : ...+s]
 *	} else {
 *		out[j*s : (j+1)*s] = pad (zeros when pad == 0)
 *	}
 *	mask[j] = t < win[b].len ? 1 : 0
 *
 * Here win.start is already the slot (start % capacity) and len <= capacity,
 * so slot+t wraps at most once; r is the ring's stride (tr_stride) and ring
 * points at the column's offset within a record. Column index ncols
 * writes the mask.
 */
#ifndef TRAJRING_WINDOW_GATHER_H
#define TRAJRING_WINDOW_GATHER_H
#include "kernels.h"

TR_HD void tr_gather_windows_run(const tr_col *col, const tr_win *wins, tr_i64 nwin, tr_i64 seqlen, tr_i64 capacity, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step, r = tr_stride(col);
	int w = tr_width(col->ring | col->out | col->aux | (tr_u64)s | (tr_u64)r);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 k0 = tid & (g - 1);
	tr_i64 n = nwin * seqlen;
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg) {
		tr_i64 b = tr_div(j, seqlen);
		tr_i64 t = j - b * seqlen;
		const tr_win *win = &wins[b];
		tr_u64 dst = col->out + (tr_u64)(j * s);
		if (t < win->len) {
			tr_i64 p = win->start + t;
			if (p >= capacity)
				p -= capacity;
			tr_copy(dst, col->ring + (tr_u64)((win->row * capacity + p) * r), w, k0, words, g);
		} else if (col->aux != 0) {
			tr_copy(dst, col->aux, w, k0, words, g);
		} else {
			tr_zero(dst, w, k0, words, g);
		}
	}
}

TR_HD void tr_window_mask_run(tr_u64 mask, const tr_win *wins, tr_i64 nwin, tr_i64 seqlen, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 n = nwin * seqlen;
	tr_i64 e;
	for (e = tid; e < n; e += nthreads) {
		tr_i64 b = tr_div(e, seqlen);
		TR_ST(tr_u8, (tr_u8 *)mask + e, (tr_u8)((e - b * seqlen) < wins[b].len ? 1 : 0));
	}
}
#endif
