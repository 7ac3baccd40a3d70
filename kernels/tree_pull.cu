// trajring_tree_pull recomputes the running sums and minima of one level
// of a table's device sum tree (kernels/host/tree.h), one thread per
// group; a repair launches it for every level, leaves first. With counts
// != 0 it also zeroes the level's count of an update state (a whole
// repair after trajring_update_apply). Grid: x strides over the level's
// groups; y is unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_tree_pull(double *tree, tr_i64 n, tr_i64 level, tr_u32 *counts)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_tree_pull_run(tree, n, level, counts, tid, nthreads);
}
