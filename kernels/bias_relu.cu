// trajring_bias_relu adds bias[j] to every element of column j of the
// row-major float32 matrix z [rows, cols] in place, then (relu != 0) sets
// negative results to 0 (host/mlp.h). Grid: x strides over elements; y is
// unused (1).
#include "host/mlp.h"

extern "C" __global__ void trajring_bias_relu(float *z, const float *bias, tr_i64 rows, tr_i64 cols, tr_i64 relu)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_bias_relu_run(z, bias, rows, cols, relu, tid, nthreads);
}
