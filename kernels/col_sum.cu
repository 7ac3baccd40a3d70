// trajring_col_sum writes the sum of each column of the row-major float32
// matrix x [rows, cols], in row order, to out[j]: a bias gradient
// (host/mlp.h). Grid: x strides over columns; y is unused (1).
#include "host/mlp.h"

extern "C" __global__ void trajring_col_sum(const float *x, float *out, tr_i64 rows, tr_i64 cols)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_col_sum_run(x, out, rows, cols, tid, nthreads);
}
