// trajring_patch_items writes changed item records (and their sum-tree
// leaf weights when leaves != 0) and live-list entries into a table's
// device mirror. With groups != 0 it also repairs the tree above the
// patched leaves, level by level (tr_repair_groups_run): it is then
// launched as one block, whose phases are separated by __syncthreads (a
// block-level synchronisation, as in trajring_tree_repair: the host build runs
// each phase for every thread before the next). Grid: x strides over the
// patches; y is unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_patch_items(tr_item *items, tr_u32 *live, double *leaves, const tr_item_patch *patches,
						tr_i64 npatch, const tr_live_patch *lives, tr_i64 nlive, tr_i64 treen, const tr_i64 *groups)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_patch_items_run(items, live, leaves, patches, npatch, lives, nlive, tid, nthreads);
	if (groups != 0) {
		tr_i64 levels = groups[0], l;
		for (l = 0; l < levels; l++) {
			__syncthreads();
			tr_repair_groups_run(leaves, treen, groups, l, tid, nthreads);
		}
	}
}
