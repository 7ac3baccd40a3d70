/*
 * td_loss.h: one thread's share of trajring_td_loss, the double-DQN TD
 * errors, Huber loss (delta 1) with importance weights and a validity
 * mask, the loss's gradient with respect to the online Q-values, and new
 * priorities; one thread per transition, grid-stride. Inputs: q, qno and
 * qnt [bsz, na] (online Q(s,·), online Q(s',·), target Q(s',·); qno == 0
 * picks the next action with the target network too), act (int64), rew,
 * disc (float32; the n-step discount, 0 after a termination), w (float64
 * importance weights) and valid (bytes, 0: masked out; valid == 0: all
 * valid). Reference loop (kernels/host.RefTDLoss), in float32 unless
 * converted:
 *
 *	for i := range bsz {
 *		wi := float32(0) // the masked weight, as MaskedWeights32
 *		if valid == nil || valid[i] != 0 {
 *			wi = float32(w[i])
 *		}
 *		a := act[i]
 *		dq[i*na:(i+1)*na] = 0
 *		if a < 0 || a >= na { // no such action: the row counts for nothing
 *			td[i], prio[i], rowLoss[i] = 0, 0, 0
 *			continue
 *		}
 *		sel := qno // or qnt when qno is nil
 *		best := 0 // the first largest
 *		for j := 1; j < na; j++ {
 *			if sel[i*na+j] > sel[i*na+best] {
 *				best = j
 *			}
 *		}
 *		y := rew[i] + float32(disc[i]*qnt[i*na+best])
 *		d := q[i*na+a] - y
 *		abs := |d|
 *		r := abs - 1 // relu(|d|-1)
 *		if !(r > 0) {
 *			r = 0
 *		}
 *		c := abs - r // min(|d|, 1)
 *		rowLoss[i] = float32(float32(float32(c*c)*0.5)+r) * wi
 *		g := min(max(d, -1), 1) // Huber's derivative
 *		dq[i*na+a] = float32(wi*g) / float32(bsz)
 *		td[i] = d
 *		prio[i] = 0
 *		if wi != 0 {
 *			prio[i] = float32(math.Abs(float64(d)) + eps)
 *		}
 *	}
 *
 * The loss is the sum of rowLoss divided by bsz, and dq is its gradient
 * (the mean is over the whole batch, masked rows included, as the CPU
 * learner's). Every operation is rounded on its own (rnf.h, rn.h), so the
 * builds agree bit for bit.
 */
#ifndef TRAJRING_TD_LOSS_H
#define TRAJRING_TD_LOSS_H
#include "kernels.h"
#include "rn.h"
#include "rnf.h"

/* TR_TD_LDQ loads the Q-values: TR_LD, unless the including kernel wrote
 * them in the same launch (trajring_td_head: coherent loads). */
#ifndef TR_TD_LDQ
#define TR_TD_LDQ TR_LD
#endif

/* The descriptor of trajring_td_head, uint64 words: the last layer's
 * inputs (the online network's on s and s', the target's on s'; X1 0 for
 * plain DQN), weights and biases (online, target), its outputs Q(s,·),
 * Q(s',·) online (0 for plain DQN) and target, the TD outputs, the batch
 * size, inputs and actions, eps (a double) and the count of finished
 * blocks (0 between launches). */
#define TR_TDH_X0 0
#define TR_TDH_X1 1
#define TR_TDH_X2 2
#define TR_TDH_W 3
#define TR_TDH_B 4
#define TR_TDH_WT 5
#define TR_TDH_BT 6
#define TR_TDH_Q 7
#define TR_TDH_QNO 8
#define TR_TDH_QNT 9
#define TR_TDH_DQ 10
#define TR_TDH_TD 11
#define TR_TDH_PRIO 12
#define TR_TDH_RL 13
#define TR_TDH_BSZ 14
#define TR_TDH_K 15
#define TR_TDH_NA 16
#define TR_TDH_EPS 17
#define TR_TDH_COUNT 18
#define TR_TDH_WORDS 19

TR_STRICT_BEGIN

TR_HD void tr_td_loss_run(const float *q, const float *qno, const float *qnt, const tr_i64 *act, const float *rew,
			  const float *disc, const double *w, const tr_u8 *valid, tr_i64 bsz, tr_i64 na, double eps, float *dq,
			  float *td, float *prio, float *rowloss, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i, j;
	for (i = tid; i < bsz; i += nthreads) {
		const float *sel = (qno != 0 ? qno : qnt) + i * na;
		float wi = 0.0f, y, d, abs, r, c, g;
		tr_i64 a = TR_LD(tr_i64, act + i), best = 0;
		if (valid == 0 || TR_LD(tr_u8, valid + i) != 0)
			wi = (float)TR_LD(double, w + i);
		for (j = 0; j < na; j++)
			dq[i * na + j] = 0.0f;
		if (a < 0 || a >= na) {
			td[i] = 0.0f;
			prio[i] = 0.0f;
			rowloss[i] = 0.0f;
			continue;
		}
		for (j = 1; j < na; j++)
			if (TR_TD_LDQ(float, sel + j) > TR_TD_LDQ(float, sel + best))
				best = j;
		y = TR_FADD(TR_LD(float, rew + i), TR_FMUL(TR_LD(float, disc + i), TR_TD_LDQ(float, qnt + i * na + best)));
		d = TR_FSUB(TR_TD_LDQ(float, q + i * na + a), y);
		abs = d < 0.0f ? -d : d;
		r = TR_FSUB(abs, 1.0f);
		if (!(r > 0.0f))
			r = 0.0f;
		c = TR_FSUB(abs, r);
		rowloss[i] = TR_FMUL(TR_FADD(TR_FMUL(TR_FMUL(c, c), 0.5f), r), wi);
		g = d > 1.0f ? 1.0f : d < -1.0f ? -1.0f : d;
		dq[i * na + a] = TR_FDIV(TR_FMUL(wi, g), (float)bsz);
		td[i] = d;
		prio[i] = wi != 0.0f ? tr_d2f_rn(tr_dadd_rn(d < 0.0f ? -(double)d : (double)d, eps)) : 0.0f;
	}
}

TR_STRICT_END
#endif /* TRAJRING_TD_LOSS_H */
