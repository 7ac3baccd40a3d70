// trajring_update_apply sets the leaf weight (p^a) of every slot whose
// winning update (trajring_update_claim) is this thread's, records p in
// the update state, and marks and lists the tree's groups above the leaf
// for trajring_tree_repair (atomics: kernels/host/tree.h). Grid: x
// strides over the updates; y is unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_update_apply(const tr_item *items, tr_i64 treen, const tr_u64 *keys, const float *prios,
						 tr_i64 n, tr_i64 slots, tr_u64 state, tr_u64 epoch, double *tree, double a, tr_u64 round)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	epoch = tr_round_epoch(round, epoch);
	tr_update_apply_run(items, treen, keys, prios, n, slots, state, epoch, tree, a, tid, nthreads);
}
