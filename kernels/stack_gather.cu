// trajring_stack_gather writes, for each of n transitions, the k frames
// of one observation column that end at its current step (y = 0, to out)
// and at its next step (y = 1, to nout; none when nout is 0), zeros before
// the episode's first step, finding the episode's edge from the device
// mirror of the per-step metadata (host/stack_gather.h); a transition
// whose frames reach a step the ring has overwritten gets valid 0 and
// masked weight 0 (when valid is not 0). Grid: x strides over frames,
// lanes sharing one; y is 0 or 1.
#include "host/stack_gather.h"

extern "C" __global__ void trajring_stack_gather(tr_u64 ring, tr_i64 stride, tr_i64 step, tr_u64 out, tr_u64 nout, const tr_win *cur,
						 const tr_win *next, tr_i64 n, tr_i64 k, tr_i64 capacity, const tr_u8 *meta,
						 const tr_i64 *cursors, tr_u8 *valid, float *masked)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	if (blockIdx.y == 0)
		tr_stack_gather_run(ring, stride, step, out, cur, n, k, capacity, meta, cursors, valid, masked, tid, nthreads);
	else if (nout != 0)
		tr_stack_gather_run(ring, stride, step, nout, next, n, k, capacity, meta, cursors, 0, 0, tid, nthreads);
}
