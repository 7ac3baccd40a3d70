/*
 * philox.h: the counter-based generator every sampling draw of trajring
 * comes from, on the device and on the host: Philox4x32-10 (Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the generator of
 * cuRAND's Philox and JAX). The same body runs in kernels (nvcc) and in the
 * host build; package internal/philox is its Go twin, used by the cpu
 * backend, and kernels/host's tests check the two bit for bit.
 *
 * A draw is a pure function of (seed, stream, call, k): draw k of sample
 * call `call` of one stream of draws (which item, which successor, ...)
 * under a table's or buffer's seed. No state advances, so thread k of a
 * kernel and iteration k of a host loop compute the same value.
 *
 * Reference (Go, package internal/philox):
 *
 *	x := Draw(seed, stream, call, k) // Block({k/2, stream, call, call>>32}, {seed, seed>>32}): words 0|1 (k even), 2|3 (k odd)
 *	i := Index(x, n)                 // hi 64 bits of x*n: in [0, n)
 *	u := Float64(x)                  // (x>>11) * 2^-53: in [0, 1)
 */
#ifndef TRAJRING_PHILOX_H
#define TRAJRING_PHILOX_H
#include "kernels.h"
#include "rn.h"

#define TR_PHILOX_M0 0xD2511F53u
#define TR_PHILOX_M1 0xCD9E8D57u
#define TR_PHILOX_W0 0x9E3779B9u
#define TR_PHILOX_W1 0xBB67AE85u

/* tr_philox4x32_10 replaces c with Philox4x32-10 of counter c under key k. */
TR_HD void tr_philox4x32_10(tr_u32 c[4], tr_u32 k0, tr_u32 k1)
{
	int r;
	for (r = 0; r < 10; r++) {
		tr_u64 p0 = (tr_u64)TR_PHILOX_M0 * c[0];
		tr_u64 p1 = (tr_u64)TR_PHILOX_M1 * c[2];
		tr_u32 n0 = (tr_u32)(p1 >> 32) ^ c[1] ^ k0;
		tr_u32 n2 = (tr_u32)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0;
		c[1] = (tr_u32)p1;
		c[2] = n2;
		c[3] = (tr_u32)p0;
		k0 += TR_PHILOX_W0;
		k1 += TR_PHILOX_W1;
	}
}

/* tr_draw returns draw k of call `call` of stream `stream` under seed:
 * one block gives two draws, words 0|1 for an even k and 2|3 for an odd k
 * of the block of counter {k/2, stream, call, call>>32}. */
TR_HD tr_u64 tr_draw(tr_u64 seed, tr_u32 stream, tr_u64 call, tr_u32 k)
{
	tr_u32 c[4];
	c[0] = k >> 1;
	c[1] = stream;
	c[2] = (tr_u32)call;
	c[3] = (tr_u32)(call >> 32);
	tr_philox4x32_10(c, (tr_u32)seed, (tr_u32)(seed >> 32));
	if (k & 1)
		return (tr_u64)c[2] | (tr_u64)c[3] << 32;
	return (tr_u64)c[0] | (tr_u64)c[1] << 32;
}

/* tr_draw_index maps a draw to [0, n): the high 64 bits of x*n, formed
 * from 32-bit halves so that every compiler computes the same bits. */
TR_HD tr_u64 tr_draw_index(tr_u64 x, tr_u64 n)
{
	tr_u64 xl = (tr_u32)x, xh = x >> 32, nl = (tr_u32)n, nh = n >> 32;
	tr_u64 ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
	tr_u64 mid = (ll >> 32) + (tr_u32)lh + (tr_u32)hl;
	return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/* tr_draw_float maps a draw to a double in [0, 1) with 53 random bits. */
TR_HD double tr_draw_float(tr_u64 x) { return tr_dmul_rn((double)(x >> 11), 1.0 / 9007199254740992.0); }

#endif
