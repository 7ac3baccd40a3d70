// trajring_argmax writes the index of the first largest element of each
// row of the row-major float32 matrix x [rows, cols] to out[i] (int64):
// the greedy actions of Q-values (host/mlp.h). Grid: x strides over rows;
// y is unused (1).
#include "host/mlp.h"

extern "C" __global__ void trajring_argmax(const float *x, tr_i64 *out, tr_i64 rows, tr_i64 cols)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_argmax_run(x, out, rows, cols, tid, nthreads);
}
