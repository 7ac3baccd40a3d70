// trajring_td_loss computes, per transition, the double-DQN TD error, the
// weighted Huber loss, its gradient with respect to the online Q-values
// and the new priority |TD|+eps (host/td_loss.h). Grid: x strides over
// transitions; y is unused (1).
#include "host/td_loss.h"

extern "C" __global__ void trajring_td_loss(const float *q, const float *qno, const float *qnt, const tr_i64 *act,
					    const float *rew, const float *disc, const double *w, const tr_u8 *valid, tr_i64 bsz,
					    tr_i64 na, double eps, float *dq, float *td, float *prio, float *rowloss)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_td_loss_run(q, qno, qnt, act, rew, disc, w, valid, bsz, na, eps, dq, td, prio, rowloss, tid, nthreads);
}
