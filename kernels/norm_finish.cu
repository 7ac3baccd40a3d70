// trajring_norm_finish adds trajring_norm_partial's partial sums in order
// on thread 0, writes the norm (double) and the clipping factor (float32,
// 1 unless the norm exceeds maxnorm) (host/grad_norm.h). Any grid; one
// block of one thread is enough.
#include "host/grad_norm.h"

extern "C" __global__ void trajring_norm_finish(const double *partial, tr_i64 parts, double maxnorm, double *norm, float *scale)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_norm_finish_run(partial, parts, maxnorm, norm, scale, tid);
}
