// trajring_nstep_check computes, for each window a draw kernel wrote, the
// n-step length k of its item from the device mirror of the per-step
// metadata and the rows' cursors, and writes the n-step, current-step and
// next-step windows, validity, masked float32 weights, discounts and
// IsDone values (host/nstep_check.h). Grid: x strides over the windows,
// one thread each; y is unused (1).
#include "host/nstep_check.h"

extern "C" __global__ void trajring_nstep_check(const tr_u8 *meta, const tr_i64 *cursors, tr_i64 capacity, tr_i64 horizon, double gamma,
						tr_i64 n, const tr_win *wins, const double *weights, tr_win *steps, tr_win *cur, tr_win *next,
						tr_u8 *valid, float *masked, float *disc, tr_u8 *done)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_nstep_check_run(meta, cursors, capacity, horizon, gamma, n, wins, weights, steps, cur, next, valid, masked, disc, done, tid,
			   nthreads);
}
