/*
 * concat.h: one thread's share of the export concatenation, transitions
 * with their successors. Reference loop (package cpu):
 *
 *	for i := range idx {
 *		out[i*s : (i+1)*s] = ring[idx[i]*r : idx[i]*r+s]
 *		if next != 0 { nextOut[i*s : (i+1)*s] = ring[nidx[i]*r : nidx[i]*r+s] }
 *	}
 *
 * (r: the ring's stride, tr_stride; ring points at the column's offset.)
 */
#ifndef TRAJRING_CONCAT_H
#define TRAJRING_CONCAT_H
#include "kernels.h"

TR_HD void tr_concat_run(const tr_col *col, const tr_i64 *idx, const tr_i64 *nidx, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step, r = tr_stride(col);
	int w = tr_width(col->ring | col->out | col->next | (tr_u64)s | (tr_u64)r);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 k0 = tid & (g - 1);
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg) {
		tr_copy(col->out + (tr_u64)(j * s), col->ring + (tr_u64)(idx[j] * r), w, k0, words, g);
		if (col->next != 0)
			tr_copy(col->next + (tr_u64)(j * s), col->ring + (tr_u64)(nidx[j] * r), w, k0, words, g);
	}
}
#endif
