/*
 * rnf.h: float32 arithmetic rounded after every operation and never fused
 * into a multiply-add, for the learner kernels (gemm.h, mlp.h, td_loss.h,
 * adam.h), which promise the host build's results bit for bit. On the
 * device TR_FADD and friends are __fadd_rn and friends, which compile to
 * add.rn.f32 and friends: ptxas and the driver's JIT never contract them
 * (a plain a*b+c may become fma.rn.f32). In the host build they are plain
 * float operators, and every function that uses them sits between
 * TR_STRICT_BEGIN and TR_STRICT_END, which turn contraction off for the
 * functions in between (gcc contracts a product and the sum it feeds
 * under its default -ffp-contract=fast whenever the target has FMA; cgo
 * does not accept -ffp-contract=off as a flag). Every caller of such a
 * function is inside a strict region too, so inlining never carries one
 * into code that contracts. Square roots and quotients are correctly
 * rounded in both builds (IEEE sqrtf and division; __fsqrt_rn and
 * __fdiv_rn), as Go's float32(math.Sqrt(float64(x))) and float32 division
 * are.
 */
#ifndef TRAJRING_RNF_H
#define TRAJRING_RNF_H
#include "kernels.h"

#ifdef __CUDACC__
#define TR_FADD(a, b) __fadd_rn((a), (b))
#define TR_FSUB(a, b) __fsub_rn((a), (b))
#define TR_FMUL(a, b) __fmul_rn((a), (b))
#define TR_FDIV(a, b) __fdiv_rn((a), (b))
#define TR_FSQRT(a) __fsqrt_rn(a)
#define TR_DSQRT(a) __dsqrt_rn(a)
#define TR_DDIV(a, b) __ddiv_rn((a), (b))
#define TR_STRICT_BEGIN
#define TR_STRICT_END
#else
#include <math.h>
#define TR_FADD(a, b) ((float)((float)(a) + (float)(b)))
#define TR_FSUB(a, b) ((float)((float)(a) - (float)(b)))
#define TR_FMUL(a, b) ((float)((float)(a) * (float)(b)))
#define TR_FDIV(a, b) ((float)((float)(a) / (float)(b)))
#define TR_FSQRT(a) sqrtf(a)
#define TR_DSQRT(a) sqrt(a)
#define TR_DDIV(a, b) ((double)(a) / (double)(b))
#if defined(__clang__)
#define TR_STRICT_BEGIN _Pragma("STDC FP_CONTRACT OFF")
#define TR_STRICT_END
#elif defined(__GNUC__)
#define TR_STRICT_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define TR_STRICT_END _Pragma("GCC pop_options")
#else
#define TR_STRICT_BEGIN
#define TR_STRICT_END
#endif
#endif
#endif /* TRAJRING_RNF_H */
