// trajring_scatter writes one batched step into the ring of every column
// (all fields in one launch). Grid: x strides over steps, y over columns.
#include "host/scatter.h"

extern "C" __global__ void trajring_scatter(const tr_col *cols, tr_i64 ncols, const tr_i64 *idx, tr_i64 n)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	for (tr_i64 c = blockIdx.y; c < ncols; c += gridDim.y)
		tr_scatter_run(&cols[c], idx, n, tid, nthreads);
}
