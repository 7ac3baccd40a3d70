// trajring_draw_prioritized selects ndraw items from a table's device sum
// tree with the tables' Philox draws, descending it exactly as the host
// tree does, and writes each one's window, key, probability and
// importance weight. Grid: x strides over the draws; y is unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_draw_prioritized(const tr_item *items, const tr_u32 *live, tr_i64 nlive, const double *tree,
						     tr_i64 n, tr_u64 seed, tr_u64 call, double beta, tr_i64 capacity, tr_i64 ndraw,
						     tr_win *wins, tr_u64 *keys, double *probs, double *weights, tr_u64 round)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_round_draw(round, &call, &nlive, 0, &beta);
	tr_draw_prioritized_run(items, live, nlive, tree, n, seed, call, beta, capacity, ndraw, wins, keys, probs, weights, tid,
				nthreads);
}
