/*
 * scatter.h: one thread's share of a scatter, the write of one batched
 * step into the ring of every column. Reference loop (package cpu):
 *
 *	for i := range idx { ring[idx[i]*r : idx[i]*r+s] = src[i*s : (i+1)*s] }
 *
 * (r: the ring's stride, tr_stride; ring points at the column's offset.)
 *
 * A negative idx[i] skips source step i (the Go wrapper marks all but the
 * last of repeated indices, so the last write wins as on the cpu).
 */
#ifndef TRAJRING_SCATTER_H
#define TRAJRING_SCATTER_H
#include "kernels.h"

TR_HD void tr_scatter_run(const tr_col *col, const tr_i64 *idx, tr_i64 n, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 s = col->step, r = tr_stride(col);
	int w = tr_width(col->ring | col->aux | (tr_u64)s | (tr_u64)r);
	tr_i64 words = s / w;
	int lg = tr_group(words, nthreads);
	tr_i64 g = (tr_i64)1 << lg;
	tr_i64 j;
	for (j = tid >> lg; j < n; j += nthreads >> lg) {
		tr_i64 ix = idx[j];
		if (ix < 0)
			continue;
		tr_copy(col->ring + (tr_u64)(ix * r), col->aux + (tr_u64)(j * s), w, tid & (g - 1), words, g);
	}
}
#endif
