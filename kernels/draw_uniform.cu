// trajring_draw_uniform selects n items uniformly from a table's device
// mirror with the tables' Philox draws and writes each one's window, key,
// probability and weight (1). Grid: x strides over the draws, one thread
// each; y is unused (1).
#include "host/select.h"

extern "C" __global__ void trajring_draw_uniform(const tr_item *items, const tr_u32 *live, tr_i64 nlive, tr_u64 seed, tr_u64 call,
						 double prob, tr_i64 capacity, tr_i64 n, tr_win *wins, tr_u64 *keys, double *probs,
						 double *weights, tr_u64 round)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_round_draw(round, &call, &nlive, &prob, 0);
	tr_draw_uniform_run(items, live, nlive, seed, call, prob, capacity, n, wins, keys, probs, weights, tid, nthreads);
}
