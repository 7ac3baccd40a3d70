// trajring_adam takes one Adam step over float32 parameters, moments and
// (optionally clipped) gradients, with the caller's float32 constants
// passed as doubles (host/adam.h). Grid: x strides over parameters; y is
// unused (1).
#include "host/adam.h"

extern "C" __global__ void trajring_adam(float *w, const float *g, float *m, float *v, tr_i64 n, const float *scale, double b1,
					 double b2, double omb1, double omb2, double eps, double neglr, double c1, double c2)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_adam_run(w, g, m, v, n, scale, (float)b1, (float)b2, (float)omb1, (float)omb2, (float)eps, (float)neglr, (float)c1,
		    (float)c2, tid, nthreads);
}
