// trajring_tree_repair repairs the groups of a table's device sum tree
// that trajring_update_apply listed, level by level, leaves first, and
// zeroes the lists' counts (kernels/host/tree.h, tr_tree_repair_run). It
// is launched as one block, whose levels are separated by __syncthreads
// (the host build runs each phase for every thread before the next).
#include "host/tree.h"

extern "C" __global__ void trajring_tree_repair(double *tree, tr_i64 treen, tr_i64 slots, tr_u64 state)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_tree t;
	int l;
	tr_tree_layout(treen, &t);
	for (l = 0; l <= t.levels; l++) {
		if (l > 0)
			__syncthreads();
		tr_tree_repair_run(tree, treen, slots, state, l, tid, nthreads);
	}
}
