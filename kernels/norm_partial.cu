// trajring_norm_partial writes parts partial sums of the squares of the
// float32 gradient g [n], partial p summing elements p, p+parts, ..., in
// double (host/grad_norm.h). Grid: x strides over partials; y is unused
// (1).
#include "host/grad_norm.h"

extern "C" __global__ void trajring_norm_partial(const float *g, tr_i64 n, tr_i64 parts, double *partial)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_norm_partial_run(g, n, parts, partial, tid, nthreads);
}
