// trajring_nstep_reward writes the discounted sum of each window's rewards
// (float32 ring [rows, capacity], one every stride bytes) to out[i], summed in double without
// fused multiply-adds and rounded once to float. Grid: x strides over
// windows, one thread per window; y is unused (1).
#include "host/nstep_reward.h"

extern "C" __global__ void trajring_nstep_reward(const float *ring, float *out, const tr_win *wins, tr_i64 n, tr_i64 capacity, double gamma, tr_i64 stride)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_nstep_reward_run(ring, out, wins, n, capacity, gamma, stride, tid, nthreads);
}
