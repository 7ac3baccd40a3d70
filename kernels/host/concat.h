/*
 * concat.h: one thread's share of the export concatenation, transitions
 * with their successors. Reference loop (package cpu):
 *
 *	for i := range idx {
 *		out[i*s : (i+1)*s] = ring[idx[i]*s : (idx[i]+1)*s]
 *		if next != 0 { nextOut[i*s : (i+1)*s] = ring[nidx[i]*s : (nidx[i]+1)*s] }
 *	}
 */
#ifndef TRAJRING_CONCAT_H
#define TRAJRING_CONCAT_H
#include "kernels.h"

TR_HD void tr_concat_run(const tr_col *col, const tr_i64 *idx, const tr_i64 *nidx, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step;
	int w = tr_width(col->ring | col->out | col->next | (tr_u64)s);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 k0 = tid & (g - 1);
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg) {
		tr_copy(col->out + (tr_u64)(j * s), col->ring + (tr_u64)(idx[j] * s), w, k0, words, g);
		if (col->next != 0)
			tr_copy(col->next + (tr_u64)(j * s), col->ring + (tr_u64)(nidx[j] * s), w, k0, words, g);
	}
}
#endif
