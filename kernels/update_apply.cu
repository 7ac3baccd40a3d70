// trajring_update_apply sets the leaf weight (p^a) of every slot whose
// winning update (trajring_update_claim) is this thread's. Grid: x strides
// over the updates; y is unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_update_apply(const tr_item *items, tr_i64 slots, const tr_u64 *keys, const float *prios,
						 tr_i64 n, const tr_u64 *winners, tr_u64 epoch, double *tree, double a)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_update_apply_run(items, slots, keys, prios, n, winners, epoch, tree, a, tid, nthreads);
}
