/*
 * gather_rows.h: one thread's share of a row gather. Reference loop
 * (package cpu):
 *
 *	for i := range idx { out[i*s : (i+1)*s] = ring[idx[i]*r : idx[i]*r+s] }
 *
 * where r is the ring's stride (tr_stride) and ring already points at the
 * column's offset within a record.
 */
#ifndef TRAJRING_GATHER_ROWS_H
#define TRAJRING_GATHER_ROWS_H
#include "kernels.h"

TR_HD void tr_gather_rows_run(const tr_col *col, const tr_i64 *idx, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step, r = tr_stride(col);
	int w = tr_width(col->ring | col->out | (tr_u64)s | (tr_u64)r);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg)
		tr_copy(col->out + (tr_u64)(j * s), col->ring + (tr_u64)(idx[j] * r), w, tid & (g - 1), words, g);
}
#endif
