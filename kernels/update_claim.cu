// trajring_update_claim makes the last of n priority updates of each slot
// its winner (a 64-bit atomic max of epoch<<32 | i+1 per slot); keys that
// name no live item are skipped. Grid: x strides over the updates; y is
// unused (1).
#include "host/tree.h"

extern "C" __global__ void trajring_update_claim(const tr_item *items, tr_i64 slots, const tr_u64 *keys, tr_i64 n,
						 tr_u64 *winners, tr_u64 epoch, tr_u64 round)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	epoch = tr_round_epoch(round, epoch);
	tr_update_claim_run(items, slots, keys, n, winners, epoch, tid, nthreads);
}
