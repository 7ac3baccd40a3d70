/*
 * nstep_check_host.h: the host build's body of trajring_nstep_check
 * (nstep_check.h), decoding the launch's arguments as the .cu entry point
 * receives them. Included by host.h after its argument macros.
 */
#ifndef TRAJRING_NSTEP_CHECK_HOST_H
#define TRAJRING_NSTEP_CHECK_HOST_H
#include "nstep_check.h"

static void tr_host_nstep_check(void **p, tr_i64 y, tr_i64 t0, tr_i64 t1, tr_i64 nt, tr_i64 gy)
{
	const tr_u8 *meta = TR_ARG_PTR(const tr_u8 *, p, 0);
	const tr_i64 *cursors = TR_ARG_PTR(const tr_i64 *, p, 1);
	tr_i64 capacity = TR_ARG_I64(p, 2);
	tr_i64 horizon = TR_ARG_I64(p, 3);
	double gamma = *(const double *)p[4];
	tr_i64 n = TR_ARG_I64(p, 5);
	const tr_win *wins = TR_ARG_PTR(const tr_win *, p, 6);
	const double *weights = TR_ARG_PTR(const double *, p, 7);
	tr_win *steps = TR_ARG_PTR(tr_win *, p, 8);
	tr_win *cur = TR_ARG_PTR(tr_win *, p, 9);
	tr_win *next = TR_ARG_PTR(tr_win *, p, 10);
	tr_u8 *valid = TR_ARG_PTR(tr_u8 *, p, 11);
	float *masked = TR_ARG_PTR(float *, p, 12);
	float *disc = TR_ARG_PTR(float *, p, 13);
	tr_u8 *done = TR_ARG_PTR(tr_u8 *, p, 14);
	tr_i64 tid;
	(void)y, (void)gy;
	for (tid = t0; tid < t1; tid++)
		tr_nstep_check_run(meta, cursors, capacity, horizon, gamma, n, wins, weights, steps, cur, next, valid, masked, disc, done,
				   tid, nt);
}
#endif
