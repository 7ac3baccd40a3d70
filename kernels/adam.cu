// trajring_adam takes one Adam step over float32 parameters, moments and
// (optionally clipped) gradients, with the caller's float32 constants
// passed as doubles (host/adam.h); with hyper not null, neglr, c1 and c2
// come from the device hyper block instead and the launch advances its
// step count (a launch replayed from a CUDA graph). Grid: x strides over
// parameters; y is unused (1).
#include "host/adam.h"

extern "C" __global__ void trajring_adam(float *w, const float *g, float *m, float *v, tr_i64 n, const float *scale, double b1,
					 double b2, double omb1, double omb2, double eps, double neglr, double c1, double c2,
					 tr_u64 *hyper)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	float nl = (float)neglr, k1 = (float)c1, k2 = (float)c2;
	tr_u64 t = 0;
	if (hyper != 0)
		t = tr_adam_hyper(hyper, &nl, &k1, &k2);
	tr_adam_run(w, g, m, v, n, scale, (float)b1, (float)b2, (float)omb1, (float)omb2, (float)eps, nl, k1, k2, tid, nthreads);
	if (hyper == 0)
		return;
	/* Every thread of the block has read t: one ticket for the block. */
	__syncthreads();
	if (threadIdx.x == 0)
		tr_adam_advance(hyper, t, blockDim.x, (tr_u64)nthreads);
}
