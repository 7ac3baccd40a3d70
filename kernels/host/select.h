/*
 * select.h: device selection of table items (one thread's share). A table
 * that selects on the device keeps a mirror of its items in device memory
 * (kernels.Mirror): a tr_item per slot and the dense list of live slots
 * (int32, in the table's order). Reference loops (package cpu,
 * Backend.PatchItems and Backend.DrawUniform):
 *
 *	patch:  for _, p := range patches { items[p.Slot] = p.Rec; if leaves != nil { leaves[p.Slot] = p.Weight } }
 *	        for _, p := range lives { live[p.Pos] = int32(p.Slot) }
 *	draw:   for k := range n {
 *	                x := philox.Draw(seed, 0, call, k)
 *	                r := items[live[philox.Index(x, nlive)]]
 *	                wins[k] = {r.Row, r.Start % capacity, r.Len}
 *	                keys[k], probs[k], weights[k] = r.Key, prob, 1
 *	        }
 *
 * The host makes every slot and position of one patch launch distinct (it
 * patches the current value of each changed entry once), so threads never
 * write the same word and no ordering or atomics are needed.
 */
#ifndef TRAJRING_SELECT_H
#define TRAJRING_SELECT_H
#include "kernels.h"
#include "philox.h"

/* tr_item is the mirror's record of one slot; matches kernels.ItemRec. */
typedef struct {
	tr_i64 row;
	tr_i64 start; /* absolute first step */
	tr_i64 len;
	tr_u64 key;
} tr_item;

/* tr_item_patch writes one slot's record and leaf weight; matches
 * kernels.ItemPatch. */
typedef struct {
	tr_i64 slot;
	tr_item rec;
	double weight;
} tr_item_patch;

/* tr_live_patch sets live[pos] = slot; matches kernels.LivePatch. */
typedef struct {
	tr_i64 pos;
	tr_i64 slot;
} tr_live_patch;

TR_HD void tr_patch_items_run(tr_item *items, tr_u32 *live, double *leaves, const tr_item_patch *patches, tr_i64 npatch,
			      const tr_live_patch *lives, tr_i64 nlive, tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i;
	for (i = tid; i < npatch + nlive; i += nthreads) {
		if (i < npatch) {
			const tr_item_patch *p = &patches[i];
			items[p->slot] = p->rec;
			if (leaves != 0)
				leaves[p->slot] = p->weight;
		} else {
			const tr_live_patch *p = &lives[i - npatch];
			live[p->pos] = (tr_u32)p->slot;
		}
	}
}

/* tr_mod returns a % b for a >= 0, b > 0 (32-bit when both fit). */
TR_HD tr_i64 tr_mod(tr_i64 a, tr_i64 b) { return a - tr_div(a, b) * b; }

/* A table's round block (kernels.Mirror's Round, RoundWords words of
 * backend memory): the Philox call and the update epoch a recorded round
 * starts from, and the live count, uniform probability and beta (as
 * float64 bits) of the day. A draw or update given one (round != 0) adds
 * its call or epoch argument to the block's and takes the rest from it,
 * so that a CUDA graph replays a round's draws and updates with the
 * counters the host uploads before each replay; with round 0 the
 * arguments are used as given. */
enum { TR_ROUND_CALL, TR_ROUND_NLIVE, TR_ROUND_PROB, TR_ROUND_BETA, TR_ROUND_EPOCH, TR_ROUND_WORDS };

TR_HD double tr_f64_of(tr_u64 u)
{
	union {
		tr_u64 u;
		double d;
	} c;
	c.u = u;
	return c.d;
}

/* tr_round_draw applies a round block (0: none) to a draw's arguments;
 * prob or beta may be NULL. */
TR_HD void tr_round_draw(tr_u64 round, tr_u64 *call, tr_i64 *nlive, double *prob, double *beta)
{
	const tr_u64 *r = (const tr_u64 *)round;
	if (round == 0)
		return;
	*call += r[TR_ROUND_CALL];
	*nlive = (tr_i64)r[TR_ROUND_NLIVE];
	if (prob != 0)
		*prob = tr_f64_of(r[TR_ROUND_PROB]);
	if (beta != 0)
		*beta = tr_f64_of(r[TR_ROUND_BETA]);
}

/* tr_round_epoch is an update's epoch under a round block (0: none). */
TR_HD tr_u64 tr_round_epoch(tr_u64 round, tr_u64 epoch)
{
	return round == 0 ? epoch : epoch + ((const tr_u64 *)round)[TR_ROUND_EPOCH];
}

TR_HD void tr_draw_uniform_run(const tr_item *items, const tr_u32 *live, tr_i64 nlive, tr_u64 seed, tr_u64 call, double prob,
			       tr_i64 capacity, tr_i64 n, tr_win *wins, tr_u64 *keys, double *probs, double *weights, tr_i64 tid,
			       tr_i64 nthreads)
{
	tr_i64 k;
	for (k = tid; k < n; k += nthreads) {
		tr_u64 x = tr_draw(seed, 0, call, (tr_u32)k);
		tr_u32 slot = live[tr_draw_index(x, (tr_u64)nlive)];
		const tr_item *r = &items[slot];
		wins[k].row = r->row;
		wins[k].start = tr_mod(r->start, capacity);
		wins[k].len = r->len;
		keys[k] = r->key;
		probs[k] = prob;
		weights[k] = 1.0;
	}
}
#endif
