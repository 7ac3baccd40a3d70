/*
 * tree.h: the device sum tree of a prioritized table that selects on the
 * device, with exactly the layout and arithmetic of the host tree
 * (tensorbuf/sumtree.go), and the kernels that repair it, draw from it and
 * update its weights from device tensors.
 *
 * A tree of n leaves (a power of two, at least 8) is one array of doubles:
 * the weights w[n], then the running sums of every level, sum[0] (n) up to
 * the top level (8, one group), then the minima of levels 1..top and the
 * root's minimum (1). size[l] is n for l = 0 and, above, the groups of
 * level l-1 rounded up to a whole group: tr_tree_layout. The minima of
 * level 0 are not stored: they are w where w > 0, +Inf elsewhere, as on the
 * host.
 *
 * Reference (Go, tensorbuf/sumtree.go pull), group g of level l:
 *
 *	acc, mn := 0.0, +Inf
 *	for j := range 8 {
 *		acc += nodeSum(l, 8g+j) // w on level 0; above, the last running sum of the child group, 0 past the level
 *		sum[l][8g+j] = acc
 *		mn = min(mn, min[l][8g+j])
 *	}
 *	min[l+1][g] = mn
 *
 * Every running sum is recomputed from its group in order, so the device
 * tree equals the host tree bit for bit for the same weights.
 */
#ifndef TRAJRING_TREE_H
#define TRAJRING_TREE_H
#include "kernels.h"
#include "rn.h"
#include "select.h"

#define TR_TREE_MAXLEV 12

#ifdef __CUDACC__
#define TR_INF __longlong_as_double(0x7ff0000000000000LL)
__device__ __forceinline__ tr_u64 tr_dbits(double d) { return (tr_u64)__double_as_longlong(d); }
#else
#include <math.h>
#include <string.h>
#define TR_INF __builtin_inf()
static inline tr_u64 tr_dbits(double d)
{
	tr_u64 b;
	memcpy(&b, &d, 8);
	return b;
}
#endif

/* tr_tree is the layout of a tree of n leaves (offsets in doubles). */
typedef struct {
	int levels;                      /* sum levels, 1 + index of the top */
	tr_i64 size[TR_TREE_MAXLEV];     /* nodes of level l */
	tr_i64 sum[TR_TREE_MAXLEV];      /* offset of sum[l] */
	tr_i64 min[TR_TREE_MAXLEV + 1];  /* offset of min[l], l >= 1 (min[levels] is the root's) */
	tr_i64 doubles;                  /* doubles in all */
} tr_tree;

TR_HD void tr_tree_layout(tr_i64 n, tr_tree *t)
{
	tr_i64 s = n, off = n;
	int l;
	t->levels = 0;
	for (;;) {
		t->size[t->levels++] = s;
		if (s <= 8 || t->levels == TR_TREE_MAXLEV)
			break;
		s = (s + 7) / 8;
		s = (s + 7) / 8 * 8;
	}
	for (l = 0; l < t->levels; l++) {
		t->sum[l] = off;
		off += t->size[l];
	}
	t->min[0] = -1;
	for (l = 1; l < t->levels; l++) {
		t->min[l] = off;
		off += t->size[l];
	}
	t->min[t->levels] = off;
	t->doubles = off + 1;
}

/* tr_tree_pull_group recomputes group g of level `level`. */
TR_HD void tr_tree_pull_group(double *tree, const tr_tree *t, tr_i64 level, tr_i64 g)
{
	double acc = 0, mn = TR_INF;
	int j;
	for (j = 0; j < 8; j++) {
		tr_i64 x = g * 8 + j;
		double s, m;
		if (level == 0) {
			s = tree[x];
			m = s > 0 ? s : TR_INF;
		} else {
			/* Nodes past the groups of the level below are padding:
			 * sum 0 and minimum +Inf, as the host tree stores them. */
			int real = x * 8 + 7 < t->size[level - 1];
			s = real ? tree[t->sum[level - 1] + x * 8 + 7] : 0;
			m = real ? tree[t->min[level] + x] : TR_INF;
		}
		acc = tr_dadd_rn(acc, s);
		tree[t->sum[level] + x] = acc;
		if (m < mn)
			mn = m;
	}
	tree[t->min[level + 1] + g] = mn;
}

/* tr_tree_pull_run recomputes the groups of level `level`: thread tid
 * takes groups tid, tid+nthreads, ... With counts != 0 (an update
 * state's counts, see tr_ustate), thread 0 also zeroes the level's
 * count: a whole repair after tr_update_apply_run. */
TR_HD void tr_tree_pull_run(double *tree, tr_i64 n, tr_i64 level, tr_u32 *counts, tr_i64 tid, tr_i64 nthreads)
{
	tr_tree t;
	tr_i64 g;
	tr_tree_layout(n, &t);
	for (g = tid; g < t.size[level] / 8; g += nthreads)
		tr_tree_pull_group(tree, &t, level, g);
	if (counts != 0 && tid == 0)
		counts[level] = 0;
}

/* tr_repair_groups_run recomputes the listed groups of one level.
 * groups is an int64 list: the number of levels L, the number of groups
 * listed per level, then the groups of level 0, of level 1, ... (each
 * group once). Run for level 0, 1, ... in turn, each after the previous
 * one has finished (the leaves patched first), it repairs the tree above
 * changed leaves. */
TR_HD void tr_repair_groups_run(double *tree, tr_i64 n, const tr_i64 *groups, tr_i64 level, tr_i64 tid, tr_i64 nthreads)
{
	tr_tree t;
	tr_i64 off = 1 + groups[0], i;
	tr_tree_layout(n, &t);
	for (i = 0; i < level; i++)
		off += groups[1 + i];
	for (i = tid; i < groups[1 + level]; i += nthreads)
		tr_tree_pull_group(tree, &t, level, groups[off + i]);
}
/* tr_child is the host's child/childPast: the node j of a group of
 * running sums ps whose range holds u, and u made relative to it. The
 * comparisons are on the bits (non-negative doubles order as their bits). */
TR_HD int tr_child(const double *ps, double *u)
{
	tr_u64 ub = tr_dbits(*u);
	int j = 0, k;
	for (k = 0; k < 8; k++)
		j += ub >= tr_dbits(ps[k]) ? 1 : 0;
	if (j == 8) {
		j = 7;
		while (j > 0 && ps[j] <= ps[j - 1])
			j--;
		if (j == 0)
			return 0;
		*u = tr_dsub_rn(*u, ps[j - 1]);
		return j;
	}
	if (j > 0)
		*u = tr_dsub_rn(*u, ps[j - 1]);
	return j;
}

/* tr_importance is min(1, (w/wmin)^-beta), 1 without beta or a positive
 * minimum. (pow here may differ from Go's math.Pow in the last bit.) */
TR_HD double tr_importance(double w, double wmin, double beta)
{
	double r;
	if (beta == 0 || !(wmin > 0) || w <= 0)
		return 1;
	r = tr_pow(w / wmin, -beta);
	return r < 1 ? r : 1;
}

/* tr_draw_prioritized_run: thread k draws x = tr_draw(seed, 0, call, k);
 * with total = sum[top][7] > 0 it descends the tree with u =
 * tr_draw_float(x) * total as the host's find does and writes prob w/total
 * and the importance weight; with total 0 it picks live[tr_draw_index(x,
 * nlive)] with prob 1/nlive and weight 1, as the host does. */
TR_HD void tr_draw_prioritized_run(const tr_item *items, const tr_u32 *live, tr_i64 nlive, const double *tree, tr_i64 n,
				   tr_u64 seed, tr_u64 call, double beta, tr_i64 capacity, tr_i64 ndraw, tr_win *wins,
				   tr_u64 *keys, double *probs, double *weights, tr_i64 tid, tr_i64 nthreads)
{
	tr_tree t;
	tr_i64 k;
	double total, wmin;
	tr_tree_layout(n, &t);
	total = tree[t.sum[t.levels - 1] + 7];
	wmin = tree[t.min[t.levels]];
	for (k = tid; k < ndraw; k += nthreads) {
		tr_u64 x = tr_draw(seed, 0, call, (tr_u32)k);
		tr_i64 slot;
		double p, wt;
		const tr_item *r;
		if (total > 0) {
			double u = tr_dmul_rn(tr_draw_float(x), total), w;
			tr_i64 i = 0;
			int l;
			for (l = t.levels - 1; l >= 0; l--)
				i = i * 8 + tr_child(&tree[t.sum[l] + i * 8], &u);
			slot = i;
			w = tree[slot];
			p = w / total;
			wt = tr_importance(w, wmin, beta);
		} else {
			slot = live[tr_draw_index(x, (tr_u64)nlive)];
			p = 1.0 / (double)nlive;
			wt = 1;
		}
		r = &items[slot];
		wins[k].row = r->row;
		wins[k].start = tr_mod(r->start, capacity);
		wins[k].len = r->len;
		keys[k] = r->key;
		probs[k] = p;
		weights[k] = wt;
	}
}

/* tr_key_slot returns the slot of a live item's key, or -1: keys carry
 * their slot in the low 32 bits, and a dead slot's record holds key 0. */
TR_HD tr_i64 tr_key_slot(const tr_item *items, tr_i64 slots, tr_u64 key)
{
	tr_i64 s = (tr_i64)(key & 0xffffffffULL);
	if (key == 0 || s >= slots || items[s].key != key)
		return -1;
	return s;
}

/*
 * The update state of a mirror (kernels.UpdateState), from the address
 * `winners` (Mirror.WinnersOff) of a mirror of `slots` slots whose tree
 * has treen leaves:
 *
 *	winners [slots]uint64   the update claims (epoch<<32 | i+1)
 *	prios   [slots]float32  the priority of each slot's last device update
 *	counts  [12]uint32      per level: groups listed in lists (0 between calls)
 *	marks   [G]uint32       per group of every level: the last epoch that listed it
 *	lists   [G]uint32       per level: the groups to repair, in any order
 *
 * G is the number of groups of all levels (tr_tree_groups); level l's
 * marks and lists start at entry goff[l]. tr_update_apply_run marks and
 * lists the groups above every leaf it sets (atomics: one list entry per
 * group and epoch), tr_tree_repair_run then repairs the listed groups
 * level by level as one block and zeroes the counts.
 */
typedef struct {
	tr_u64 *winners;
	float *prios;
	tr_u32 *counts;
	tr_u32 *marks;
	tr_u32 *lists;
	tr_i64 goff[TR_TREE_MAXLEV + 1]; /* first group of level l; goff[levels] = G */
} tr_ustate;

/* tr_tree_groups returns the first group of each level of t in goff
 * (goff[levels] is the total). */
TR_HD void tr_tree_groups(const tr_tree *t, tr_i64 *goff)
{
	int l;
	goff[0] = 0;
	for (l = 0; l < t->levels; l++)
		goff[l + 1] = goff[l] + t->size[l] / 8;
}

/* tr_ustate_at lays the update state out from winners. */
TR_HD void tr_ustate_at(tr_u64 winners, tr_i64 slots, const tr_tree *t, tr_ustate *u)
{
	tr_tree_groups(t, u->goff);
	u->winners = (tr_u64 *)winners;
	u->prios = (float *)(winners + 8 * (tr_u64)slots);
	u->counts = (tr_u32 *)(winners + 12 * (tr_u64)slots);
	u->marks = u->counts + TR_TREE_MAXLEV;
	u->lists = u->marks + u->goff[t->levels];
}

/* tr_update_claim_run: update i claims its key's slot, the last update of
 * a slot winning: winners[slot] = max(epoch<<32 | i+1). */
TR_HD void tr_update_claim_run(const tr_item *items, tr_i64 slots, const tr_u64 *keys, tr_i64 n, tr_u64 *winners, tr_u64 epoch,
			       tr_i64 tid, tr_i64 nthreads)
{
	tr_i64 i;
	for (i = tid; i < n; i += nthreads) {
		tr_i64 s = tr_key_slot(items, slots, keys[i]);
		if (s >= 0)
			tr_atomic_max_u64(&winners[s], epoch << 32 | (tr_u64)(i + 1));
	}
}

/* tr_update_apply_run: the winning update of each slot sets its leaf
 * weight to p^a (p when a is 1) and records p in prios; a priority that
 * is negative, NaN or infinite leaves the slot as it was. The groups
 * above every leaf set are marked with the epoch and listed, each once
 * per level and epoch (an atomic exchange of its mark decides who lists
 * it; an atomic add takes the list entry), for tr_tree_repair_run. A
 * count past its level's groups (counts left over by a failed repair)
 * lists nothing more: the repair then repairs that whole level. treen
 * is the tree's leaves (keys of slots past it are skipped). */
TR_HD void tr_update_apply_run(const tr_item *items, tr_i64 treen, const tr_u64 *keys, const float *prios, tr_i64 n,
			       tr_i64 slots, tr_u64 state, tr_u64 epoch, double *tree, double a, tr_i64 tid, tr_i64 nthreads)
{
	tr_tree t;
	tr_ustate u;
	tr_i64 i;
	tr_tree_layout(treen, &t);
	tr_ustate_at(state, slots, &t, &u);
	for (i = tid; i < n; i += nthreads) {
		tr_i64 s = tr_key_slot(items, treen, keys[i]), g;
		double p;
		int l;
		if (s < 0 || u.winners[s] != (epoch << 32 | (tr_u64)(i + 1)))
			continue;
		p = (double)prios[i];
		if (!(p >= 0 && p <= 1.7976931348623157e308))
			continue;
		tree[s] = a == 1 ? p : tr_pow(p, a);
		u.prios[s] = prios[i];
		for (l = 0, g = s / 8; l < t.levels; l++, g /= 8) {
			tr_u32 k;
			if (tr_atomic_exch_u32(&u.marks[u.goff[l] + g], (tr_u32)epoch) == (tr_u32)epoch)
				break; /* listed by another update, with every group above */
			k = tr_atomic_add_u32(&u.counts[l], 1);
			if ((tr_i64)k < u.goff[l + 1] - u.goff[l])
				u.lists[u.goff[l] + k] = (tr_u32)g;
		}
	}
}

/* tr_tree_repair_run is one phase of the repair of the groups listed by
 * tr_update_apply_run: phase l < levels recomputes the listed groups of
 * level l (every group of the level when its count exceeds them), thread
 * tid taking entries tid, tid+nthreads, ...; phase `levels` zeroes the
 * counts (thread 0). The phases run in order, each after every thread
 * has finished the previous one (__syncthreads in one block). */
TR_HD void tr_tree_repair_run(double *tree, tr_i64 treen, tr_i64 slots, tr_u64 state, int phase, tr_i64 tid, tr_i64 nthreads)
{
	tr_tree t;
	tr_ustate u;
	tr_i64 i, cnt, ng;
	tr_tree_layout(treen, &t);
	tr_ustate_at(state, slots, &t, &u);
	if (phase >= t.levels) {
		for (i = tid; i < TR_TREE_MAXLEV; i += nthreads)
			u.counts[i] = 0;
		return;
	}
	ng = u.goff[phase + 1] - u.goff[phase];
	cnt = u.counts[phase];
	if (cnt > ng) {
		for (i = tid; i < ng; i += nthreads)
			tr_tree_pull_group(tree, &t, phase, i);
		return;
	}
	for (i = tid; i < cnt; i += nthreads)
		tr_tree_pull_group(tree, &t, phase, u.lists[u.goff[phase] + i]);
}
#endif
