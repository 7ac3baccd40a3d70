// trajring_patch_items writes changed item records (and their sum-tree
// leaf weights when leaves != 0) and live-list entries into a table's
// device mirror. Grid: x strides over the patches, one thread each; y is
// unused (1).
#include "host/select.h"

extern "C" __global__ void trajring_patch_items(tr_item *items, tr_u32 *live, double *leaves, const tr_item_patch *patches,
						tr_i64 npatch, const tr_live_patch *lives, tr_i64 nlive)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_patch_items_run(items, live, leaves, patches, npatch, lives, nlive, tid, nthreads);
}
