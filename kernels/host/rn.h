/*
 * rn.h: double arithmetic rounded after every operation, never fused into
 * a multiply-add, wherever a kernel promises the host's result bit for
 * bit (the sum tree's running sums and descent, the draws' floats, the
 * n-step reward sums). In PTX a plain mul.f64, add.f64 or sub.f64 may be
 * contracted into an fma by ptxas, or by the driver when it JITs the PTX
 * (a GPU newer than the fatbin's SASS, or CUDA_FORCE_PTX_JIT=1); the
 * __dadd_rn family compiles to add.rn.f64 and friends, which never are.
 * kernels/ptx_test.go checks that no kernel entry of the committed PTX
 * has an f32 or f64 add, sub, mul or fma without .rn. pow, whose result
 * may differ from Go's math.Pow in the last bit anyway, stays out of the
 * entries in a function of its own (tr_pow).
 *
 * The host build must not contract a product and the sum it feeds into
 * either (gcc does, across statements, under its default
 * -ffp-contract=fast whenever the target has FMA): contraction is off
 * for these definitions, and they are out of line as well (a returned
 * double is rounded), for compilers that ignore both pragmas. cgo does
 * not accept -ffp-contract=off as a flag.
 */
#ifndef TRAJRING_RN_H
#define TRAJRING_RN_H
#include "kernels.h"

#ifdef __CUDACC__
#define tr_dadd_rn __dadd_rn
#define tr_dsub_rn __dsub_rn
#define tr_dmul_rn __dmul_rn
#define tr_d2f_rn __double2float_rn
__device__ __noinline__ double tr_pow(double x, double y) { return pow(x, y); }
#else
#include <math.h>
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#define TR_RN_POP_OPTIONS
#endif
__attribute__((noinline, unused)) static double tr_dadd_rn(double a, double b)
{
	return a + b;
}
__attribute__((noinline, unused)) static double tr_dsub_rn(double a, double b)
{
	return a - b;
}
__attribute__((noinline, unused)) static double tr_dmul_rn(double a, double b)
{
	return a * b;
}
static inline float tr_d2f_rn(double a)
{
	return (float)a;
}
static inline double tr_pow(double x, double y)
{
	return pow(x, y);
}
#ifdef TR_RN_POP_OPTIONS
#pragma GCC pop_options
#undef TR_RN_POP_OPTIONS
#endif
#endif
#endif /* TRAJRING_RN_H */
