// trajring_gather_rows reads ring steps by index into a dense output, every
// column in one launch. Grid: x strides over steps, y over columns.
#include "host/gather_rows.h"

extern "C" __global__ void trajring_gather_rows(const tr_col *cols, tr_i64 ncols, const tr_i64 *idx, tr_i64 n)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	for (tr_i64 c = blockIdx.y; c < ncols; c += gridDim.y)
		tr_gather_rows_run(&cols[c], idx, n, tid, nthreads);
}
