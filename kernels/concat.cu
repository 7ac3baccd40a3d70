// trajring_concat writes transitions and their successors (the export
// concatenation), every column in one launch. Grid: x strides over steps,
// y over columns.
#include "host/concat.h"

extern "C" __global__ void trajring_concat(const tr_col *cols, tr_i64 ncols, const tr_i64 *idx, const tr_i64 *nidx, tr_i64 n)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	for (tr_i64 c = blockIdx.y; c < ncols; c += gridDim.y)
		tr_concat_run(&cols[c], idx, nidx, n, tid, nthreads);
}
