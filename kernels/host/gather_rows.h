/*
 * gather_rows.h: one thread's share of a row gather. Reference loop
 * (package cpu):
 *
 *	for i := range idx { out[i*s : (i+1)*s] = ring[idx[i]*s : (idx[i]+1)*s] }
 */
#ifndef TRAJRING_GATHER_ROWS_H
#define TRAJRING_GATHER_ROWS_H
#include "kernels.h"

TR_HD void tr_gather_rows_run(const tr_col *col, const tr_i64 *idx, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step;
	int w = tr_width(col->ring | col->out | (tr_u64)s);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg)
		tr_copy(col->out + (tr_u64)(j * s), col->ring + (tr_u64)(idx[j] * s), w, tid & (g - 1), words, g);
}
#endif
