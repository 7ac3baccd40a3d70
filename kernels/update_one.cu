// trajring_update_one is trajring_update_claim, trajring_update_apply and
// trajring_tree_repair in one launch of one block (host/tree.h): the
// block's threads claim the updates' slots, then (after __syncthreads)
// the winners set their leaves and list the groups above them, then the
// block repairs the listed groups level by level, each phase after the
// last, exactly as the three launches do: the tree, the recorded
// priorities and the update state are theirs bit for bit. The gpu
// backend launches it for up to updateOneMax updates (a batch's); blocks
// past the first do nothing.
#include "host/tree.h"

extern "C" __global__ void trajring_update_one(const tr_item *items, tr_i64 treen, const tr_u64 *keys, const float *prios,
					       tr_i64 n, tr_i64 slots, tr_u64 state, tr_u64 epoch, double *tree, double a, tr_u64 round)
{
	tr_i64 tid = threadIdx.x, nthreads = blockDim.x;
	tr_tree t;
	int l;
	if (blockIdx.x != 0)
		return;
	epoch = tr_round_epoch(round, epoch);
	tr_tree_layout(treen, &t);
	tr_update_claim_run(items, treen, keys, n, (tr_u64 *)state, epoch, tid, nthreads);
	__syncthreads();
	tr_update_apply_run(items, treen, keys, prios, n, slots, state, epoch, tree, a, tid, nthreads);
	for (l = 0; l <= t.levels; l++) {
		__syncthreads();
		tr_tree_repair_run(tree, treen, slots, state, l, tid, nthreads);
	}
}
