/*
 * kernels.h: what every trajring kernel shares, for nvcc (device code) and
 * for a host C compiler (the host build used by tests and by the stand-in
 * driver). Element functions are TR_HD: __host__ __device__ under nvcc,
 * static inline C elsewhere.
 *
 * A kernel is written once as a "run" function that executes the work of
 * one thread of a grid-stride loop: thread tid of nthreads, for column c
 * (blockIdx.y on the device). The __global__ wrappers in the .cu files call
 * it with the CUDA thread index; the host build calls it for every tid in
 * turn, or, in the race-exposure mode of the stand-in (launch.h), in
 * shuffled units on several host threads at once. There is no block-level
 * synchronisation anywhere but in two kernels, so running the threads one
 * after another on the host computes the same bytes; the exceptions,
 * trajring_patch_items and trajring_tree_repair repairing a sum tree as
 * one block (tree.h), separate their phases with __syncthreads, and their
 * host builds run each phase for every thread of the block before the
 * next (the race-exposure mode keeps such a launch's block whole). Threads of one launch that touch the
 * same memory must do so through the tr_atomic_* helpers below (real
 * atomics in both builds), never with TR_LD/TR_ST.
 *
 * All addresses are carried as 64-bit integers and all sizes as int64, so
 * the same layout is read by Go (package kernels, desc.go), by the device
 * and by the host.
 */
#ifndef TRAJRING_KERNELS_H
#define TRAJRING_KERNELS_H

#ifdef __CUDACC__
#define TR_HD __host__ __device__ __forceinline__
typedef unsigned long long tr_u64;
typedef long long tr_i64;
typedef unsigned int tr_u32;
typedef unsigned short tr_u16;
typedef unsigned char tr_u8;
typedef uint4 tr_v16; /* 16-byte vector: ld/st.global.v4.u32 */
/* Loads go through the read-only data path (ld.global.nc: nothing a
 * kernel reads is written by the same launch); stores are plain weak
 * st.global (SASS STG.E.128 and narrower). Plain dereferences of addresses
 * read from a descriptor would compile to generic ld/st, and __stwb to
 * strong stores. */
#define TR_LD(T, p) __ldg((const T *)(p))
#define TR_ST(T, p, v) tr_st((T *)(p), (v))
__device__ __forceinline__ void tr_st(uint4 *p, uint4 v)
{
	asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}
__device__ __forceinline__ void tr_st(unsigned long long *p, unsigned long long v)
{
	asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v));
}
__device__ __forceinline__ void tr_st(unsigned int *p, unsigned int v)
{
	asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v));
}
__device__ __forceinline__ void tr_st(unsigned short *p, unsigned short v)
{
	asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(v));
}
__device__ __forceinline__ void tr_st(unsigned char *p, unsigned char v)
{
	asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "h"((unsigned short)v));
}
#else
#include <stdint.h>
#define TR_HD static inline
typedef uint64_t tr_u64;
typedef int64_t tr_i64;
typedef uint32_t tr_u32;
typedef uint16_t tr_u16;
typedef uint8_t tr_u8;
typedef struct {
	uint64_t lo, hi;
} __attribute__((aligned(16))) tr_v16;
#define TR_LD(T, p) (*(const T *)(p))
#define TR_ST(T, p, v) (*(T *)(p) = (v))
#endif

/*
 * Atomics, for kernels whose threads share memory within one launch
 * (counters, claims, flags). Under nvcc's device pass they are CUDA's
 * atomicAdd, atomicCAS, atomicExch and atomicMax (relaxed, device scope)
 * and a volatile load; in the host build (and nvcc's host pass) GCC's
 * __atomic builtins, relaxed, so the stand-in's race-exposure mode runs
 * them as real atomics on several host threads. Each returns the old
 * value. tr_atomic_load reads a word other threads of the launch may
 * write: never TR_LD, which on the device reads through the
 * non-coherent read-only cache. tr_fence orders this thread's earlier
 * writes before its later ones for every thread of the device
 * (__threadfence); on the host a sequentially consistent fence. A write
 * that another thread needs without atomics needs a launch boundary.
 */
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
#define TR_ATOMIC_DEF(T, sfx)                                                                                 \
	__device__ __forceinline__ T tr_atomic_add_##sfx(T *p, T v) { return atomicAdd(p, v); }            \
	__device__ __forceinline__ T tr_atomic_cas_##sfx(T *p, T cmp, T v) { return atomicCAS(p, cmp, v); } \
	__device__ __forceinline__ T tr_atomic_exch_##sfx(T *p, T v) { return atomicExch(p, v); }          \
	__device__ __forceinline__ T tr_atomic_max_##sfx(T *p, T v) { return atomicMax(p, v); }            \
	__device__ __forceinline__ T tr_atomic_load_##sfx(const T *p) { return *(const volatile T *)p; }
TR_ATOMIC_DEF(tr_u32, u32)
TR_ATOMIC_DEF(tr_u64, u64)
#undef TR_ATOMIC_DEF
__device__ __forceinline__ void tr_fence(void) { __threadfence(); }
#else
#define TR_ATOMIC_DEF(T, sfx)                                                                                 \
	TR_HD T tr_atomic_add_##sfx(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }       \
	TR_HD T tr_atomic_cas_##sfx(T *p, T cmp, T v)                                                         \
	{                                                                                                     \
		__atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);              \
		return cmp;                                                                                   \
	}                                                                                                     \
	TR_HD T tr_atomic_exch_##sfx(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }     \
	TR_HD T tr_atomic_max_##sfx(T *p, T v)                                                                \
	{                                                                                                     \
		T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                 \
		while (old < v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
			;                                                                                     \
		return old;                                                                                   \
	}                                                                                                     \
	TR_HD T tr_atomic_load_##sfx(const T *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
TR_ATOMIC_DEF(tr_u32, u32)
TR_ATOMIC_DEF(tr_u64, u64)
#undef TR_ATOMIC_DEF
TR_HD void tr_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

/*
 * tr_col describes one column (field) of a multi-column launch. The launch
 * passes a device pointer to an array of them, so all fields move in one
 * launch. Layout must match kernels.ColDesc in desc.go (6 x 8 bytes).
 */
typedef struct {
	tr_u64 ring;   /* the column's bytes of ring step 0: step k is at ring + k*stride */
	tr_u64 out;    /* first output step (offset already applied) */
	tr_u64 next;   /* concat: first successor output step; 0 = none */
	tr_u64 aux;    /* scatter: first source step; windows: pad step, 0 = zeros */
	tr_i64 step;   /* bytes per step, > 0 */
	tr_i64 stride; /* bytes from one ring step to the next (a packed record); 0 = step */
} tr_col;

/* tr_stride returns the bytes from one ring step of col to the next. */
TR_HD tr_i64 tr_stride(const tr_col *col)
{
	return col->stride != 0 ? col->stride : col->step;
}

/* tr_win is one window of gather_windows; matches kernels.Window. The slot
 * of its first step (start % capacity) is computed before the launch. */
typedef struct {
	tr_i64 row;
	tr_i64 start; /* slot of the first step, in [0, capacity) */
	tr_i64 len;   /* real steps, in [0, seqLen] */
} tr_win;

/* tr_width returns the widest word (16, 8, 4, 2 or 1 bytes) that divides
 * every address and size OR-ed into m, so whole steps move as aligned words. */
TR_HD int tr_width(tr_u64 m)
{
	if ((m & 15) == 0)
		return 16;
	if ((m & 7) == 0)
		return 8;
	if ((m & 3) == 0)
		return 4;
	if ((m & 1) == 0)
		return 2;
	return 1;
}

/* tr_div returns a / b for a >= 0, b > 0, with a 32-bit division when
 * both fit (much cheaper on the device than a 64-bit one). */
TR_HD tr_i64 tr_div(tr_i64 a, tr_i64 b)
{
	if ((((tr_u64)a | (tr_u64)b) >> 32) == 0)
		return (tr_i64)((tr_u32)a / (tr_u32)b);
	return a / b;
}

/* tr_log2 returns log2 of a power of two up to 32. */
TR_HD int tr_log2(tr_i64 g)
{
	int l = 0;
	while ((1LL << l) < g)
		l++;
	return l;
}

/* TR_MAX_GROUP is the most threads that share one step: the block size of
 * every launch (gpu.blockSize), so a group never spans blocks. */
#define TR_MAX_GROUP 256

/* TR_UNROLL is the number of 16-byte words a lane loads before it stores
 * them (loads in flight per thread). */
#define TR_UNROLL 4

/*
 * tr_lanes returns how many consecutive threads should share a step of
 * words words: at least min(words, 32) (coalesced small steps, as one warp
 * would), and enough that no lane moves more than TR_UNROLL words when
 * the step is large (so a 3 KB step takes one round trip of 64 lanes, not
 * six of 32), as a power of two no greater than words and TR_MAX_GROUP.
 * kernels.Lanes in Go is the same function, for sizing grids.
 */
TR_HD tr_i64 tr_lanes(tr_i64 words)
{
	tr_i64 want = words < 32 ? words : 32, g = 1;
	if ((words + TR_UNROLL - 1) / TR_UNROLL > want)
		want = (words + TR_UNROLL - 1) / TR_UNROLL;
	while (g < want && g < TR_MAX_GROUP)
		g <<= 1;
	while (g > 1 && g > words)
		g >>= 1;
	return g;
}

/*
 * tr_group picks how many consecutive threads share one step: tr_lanes,
 * halved until it divides nthreads. A group computes the step's addresses
 * once and its lanes move consecutive words (coalesced). Returns log2 of
 * the group size.
 */
TR_HD int tr_group(tr_i64 words, tr_i64 nthreads)
{
	tr_i64 g = tr_lanes(words);
	while (g > 1 && nthreads % g != 0)
		g >>= 1;
	return tr_log2(g);
}

/* tr_copy moves words k0, k0+G, ... < words of one step, w bytes each. */
TR_HD void tr_copy(tr_u64 dst, tr_u64 src, int w, tr_i64 k0, tr_i64 words, tr_i64 g)
{
	tr_i64 k;
	switch (w) {
	case 16:
		/* Up to TR_UNROLL loads in flight before the first store. */
		for (k = k0; k < words; k += TR_UNROLL * g) {
			const tr_v16 *sp = (const tr_v16 *)src + k;
			tr_v16 *dp = (tr_v16 *)dst + k;
			tr_v16 v0, v1, v2, v3;
			int m = (int)((words - k + g - 1) / g); /* words left for this lane */
			v0 = TR_LD(tr_v16, sp);
			v1 = v2 = v3 = v0; /* unused unless loaded below */
			if (m > 1)
				v1 = TR_LD(tr_v16, sp + g);
			if (m > 2)
				v2 = TR_LD(tr_v16, sp + 2 * g);
			if (m > 3)
				v3 = TR_LD(tr_v16, sp + 3 * g);
			TR_ST(tr_v16, dp, v0);
			if (m > 1)
				TR_ST(tr_v16, dp + g, v1);
			if (m > 2)
				TR_ST(tr_v16, dp + 2 * g, v2);
			if (m > 3)
				TR_ST(tr_v16, dp + 3 * g, v3);
		}
		break;
	case 8:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u64, (tr_u64 *)dst + k, TR_LD(tr_u64, (const tr_u64 *)src + k));
		break;
	case 4:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u32, (tr_u32 *)dst + k, TR_LD(tr_u32, (const tr_u32 *)src + k));
		break;
	case 2:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u16, (tr_u16 *)dst + k, TR_LD(tr_u16, (const tr_u16 *)src + k));
		break;
	default:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u8, (tr_u8 *)dst + k, TR_LD(tr_u8, (const tr_u8 *)src + k));
		break;
	}
}

/* tr_zero clears words k0, k0+G, ... < words of one step, w bytes each. */
TR_HD void tr_zero(tr_u64 dst, int w, tr_i64 k0, tr_i64 words, tr_i64 g)
{
	tr_i64 k;
	switch (w) {
	case 16:
		for (k = k0; k < words; k += g) {
			tr_v16 z;
#ifdef __CUDACC__
			z = make_uint4(0, 0, 0, 0);
#else
			z.lo = 0;
			z.hi = 0;
#endif
			TR_ST(tr_v16, (tr_v16 *)dst + k, z);
		}
		break;
	case 8:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u64, (tr_u64 *)dst + k, (tr_u64)0);
		break;
	case 4:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u32, (tr_u32 *)dst + k, (tr_u32)0);
		break;
	case 2:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u16, (tr_u16 *)dst + k, (tr_u16)0);
		break;
	default:
		for (k = k0; k < words; k += g)
			TR_ST(tr_u8, (tr_u8 *)dst + k, (tr_u8)0);
		break;
	}
}

#endif /* TRAJRING_KERNELS_H */
