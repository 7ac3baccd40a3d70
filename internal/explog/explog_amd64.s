//go:build amd64 && !purego

#include "textflag.h"

// Each constant is stored eight times (64 bytes), to be a 256-bit or a
// 512-bit memory operand.
#define CONST(name, bits) \
	DATA name<>+0(SB)/8, $bits; \
	DATA name<>+8(SB)/8, $bits; \
	DATA name<>+16(SB)/8, $bits; \
	DATA name<>+24(SB)/8, $bits; \
	DATA name<>+32(SB)/8, $bits; \
	DATA name<>+40(SB)/8, $bits; \
	DATA name<>+48(SB)/8, $bits; \
	DATA name<>+56(SB)/8, $bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $64

// Bit masks and conversion helpers.
CONST(fracMask, 0x000FFFFFFFFFFFFF)    // fraction bits
CONST(half, 0x3FE0000000000000)        // 0.5
CONST(one, 0x3FF0000000000000)         // 1
CONST(two, 0x4000000000000000)         // 2
CONST(two52, 0x4330000000000000)       // 2^52: 2^52 | e reads as 2^52+e
CONST(two52exp, 0x43300000000003FE)    // 2^52 + 1022
CONST(two52bias, 0x43300000000003FF)   // 2^52 + 1023
CONST(minNormal, 0x0010000000000000)   // smallest positive normal
CONST(maxFinite, 0x7FEFFFFFFFFFFFFF)   // largest finite
CONST(minExp, 0xC08FF00000000000)      // -1022
CONST(maxExp, 0x408FF80000000000)      // 1023

// Logarithm: the split point sqrt(2)/2, ln 2 in a high part (trailing
// zero bits, so k*hi is exact) and a low part, and the coefficients of
// the series in s = f/(2+f).
CONST(sqrtHalf, 0x3FE6A09E667F3BCD)
CONST(logLn2Hi, 0x3FE62E42FEE00000)
CONST(logLn2Lo, 0x3DEA39EF35793C76)
CONST(lg1, 0x3FE5555555555593)
CONST(lg2, 0x3FD999999997FA04)
CONST(lg3, 0x3FD2492494229359)
CONST(lg4, 0x3FCC71C51D8E78AF)
CONST(lg5, 0x3FC7466496CB03DE)
CONST(lg6, 0x3FC39A09D078C69F)
CONST(lg7, 0x3FC2F112DF3E5244)

// Exponential: 1/ln 2, ln 2 in an upper and a lower part, 1/16 (the
// argument is reduced by 16 and the result squared four times through
// e^2r - 1 = (e^r - 1)(e^r - 1 + 2)), and 1/k! for k = 3..8.
CONST(log2e, 0x3FF71547652B82FE)
CONST(expLn2U, 0x3FE62E42FEFA3000)
CONST(expLn2L, 0x3D53DE6AF278ECE6)
CONST(sixteenth, 0x3FB0000000000000)
CONST(inv3f, 0x3FC5555555555555)
CONST(inv4f, 0x3FA5555555555555)
CONST(inv5f, 0x3F81111111111111)
CONST(inv6f, 0x3F56C16C16C16C17)
CONST(inv7f, 0x3F2A01A01A01A01A)
CONST(inv8f, 0x3EFA01A01A01A01A)

// LOGTAIL is LOG from the reduced fraction on, for registers of any
// width: kk = k, ff = f, ss the split point's 1 or 0 (then s), zz, ww and
// rr temporaries (the result in kk).
#define LOGTAIL(kk, ff, ss, zz, ww, rr) \
	VSUBPD ss, kk, kk; \
	VADDPD one<>(SB), ss, ss; \
	VMULPD ss, ff, ff; \
	VSUBPD one<>(SB), ff, ff; \
	VADDPD two<>(SB), ff, zz; \
	VDIVPD zz, ff, ss; \
	VMULPD ss, ss, zz; \
	VMULPD zz, zz, ww; \
	VMULPD lg7<>(SB), ww, rr; \
	VADDPD lg5<>(SB), rr, rr; \
	VMULPD ww, rr, rr; \
	VADDPD lg3<>(SB), rr, rr; \
	VMULPD ww, rr, rr; \
	VADDPD lg1<>(SB), rr, rr; \
	VMULPD rr, zz, zz; \
	VMULPD lg6<>(SB), ww, rr; \
	VADDPD lg4<>(SB), rr, rr; \
	VMULPD ww, rr, rr; \
	VADDPD lg2<>(SB), rr, rr; \
	VMULPD rr, ww, ww; \
	VADDPD ww, zz, zz; \
	VMULPD half<>(SB), ff, rr; \
	VMULPD ff, rr, rr; \
	VADDPD rr, zz, zz; \
	VMULPD zz, ss, ss; \
	VMULPD logLn2Lo<>(SB), kk, zz; \
	VADDPD zz, ss, ss; \
	VSUBPD ss, rr, rr; \
	VSUBPD ff, rr, rr; \
	VMULPD logLn2Hi<>(SB), kk, kk; \
	VSUBPD rr, kk, kk

// LOG sets Y1 = Log(Y7) lane by lane for positive normal finite lanes,
// rounding as math.Log does on amd64 (no fused operations there): with
// x = f1 * 2^k, f1 in [0.5, 1), moved to (sqrt(2)/2, sqrt(2)] (f1 equal
// to sqrt(2)/2 moves too), f = f1-1 and s = f/(2+f),
// Log = k*Ln2Hi - ((hfsq - (s*(hfsq+R) + k*Ln2Lo)) - f) with
// hfsq = f*f/2 and R the series in s^2. Clobbers Y2-Y6.
#define LOG \
	VANDPD fracMask<>(SB), Y7, Y2; \
	VORPD half<>(SB), Y2, Y2; \
	VPSRLQ $52, Y7, Y1; \
	VPOR two52<>(SB), Y1, Y1; \
	VSUBPD two52exp<>(SB), Y1, Y1; \
	VCMPPD $2, sqrtHalf<>(SB), Y2, Y3; \
	VANDPD one<>(SB), Y3, Y3; \
	LOGTAIL(Y1, Y2, Y3, Y4, Y5, Y6)

// EXPK sets Y0 = Y15*Y1 (the exponential's argument t) and Y1 = k, t/ln 2
// rounded to the nearest integer (ties to even: the default MXCSR, as
// math.Exp's conversion); t not finite or far out of range gives the
// integer indefinite value, -2^31.
#define EXPK \
	VMULPD Y15, Y1, Y0; \
	VMULPD log2e<>(SB), Y0, Y1; \
	VCVTPD2DQY Y1, X1; \
	VCVTDQ2PD X1, Y1

// EXPSCALE multiplies tt by 2^k for k = kk in [-1022, 1023], building
// the power's bits from 2^52+1023+k in qq.
#define EXPSCALE(tt, kk, qq) \
	VADDPD two52bias<>(SB), kk, qq; \
	VPSLLQ $52, qq, qq; \
	VMULPD qq, tt, tt

// EXPFMA is the exponential from t = tt and k = kk on, with fused
// operations where math.Exp fuses (see expLogFMA), for registers of any
// width: the result in tt; pp and qq temporaries.
#define EXPFMA(tt, kk, pp, qq) \
	VFNMADD231PD expLn2U<>(SB), kk, tt; \
	VFNMADD231PD expLn2L<>(SB), kk, tt; \
	VMULPD sixteenth<>(SB), tt, tt; \
	VMOVUPD inv8f<>(SB), pp; \
	VFMADD213PD inv7f<>(SB), tt, pp; \
	VFMADD213PD inv6f<>(SB), tt, pp; \
	VFMADD213PD inv5f<>(SB), tt, pp; \
	VFMADD213PD inv4f<>(SB), tt, pp; \
	VFMADD213PD inv3f<>(SB), tt, pp; \
	VFMADD213PD half<>(SB), tt, pp; \
	VFMADD213PD one<>(SB), tt, pp; \
	VMULPD pp, tt, tt; \
	VADDPD two<>(SB), tt, pp; \
	VMULPD pp, tt, tt; \
	VADDPD two<>(SB), tt, pp; \
	VMULPD pp, tt, tt; \
	VADDPD two<>(SB), tt, pp; \
	VMULPD pp, tt, tt; \
	VADDPD two<>(SB), tt, pp; \
	VFMADD213PD one<>(SB), pp, tt; \
	EXPSCALE(tt, kk, qq)

// CHECK sets AX to the lanes (bit i for lane i) that took the straight
// path of both functions: x a positive normal finite number and k in
// [-1022, 1023] (which excludes a t that is not finite or over the
// overflow bound, and a subnormal or zero result).
#define CHECK \
	VCMPPD $13, minNormal<>(SB), Y7, Y8; \
	VCMPPD $2, maxFinite<>(SB), Y7, Y9; \
	VANDPD Y9, Y8, Y8; \
	VCMPPD $13, minExp<>(SB), Y1, Y9; \
	VANDPD Y9, Y8, Y8; \
	VCMPPD $2, maxExp<>(SB), Y1, Y9; \
	VANDPD Y9, Y8, Y8; \
	VMOVMSKPD Y8, AX

// func expLogAVX2(dst, xs unsafe.Pointer, n int, y float64) int
//
// The exponential without fused operations: t -= k*ln2U; t -= k*ln2L;
// r = t/16; p = Horner of 1/8!..1/2!, 1 in r (multiply, then add);
// e = r*p; four times e = e*(e+2); e += 1; times 2^k.
TEXT ·expLogAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ xs+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD y+24(FP), Y15
	XORQ BX, BX

plainLoop:
	CMPQ BX, CX
	JGE  plainDone
	VMOVUPD (SI)(BX*8), Y7
	LOG
	EXPK
	VMULPD expLn2U<>(SB), Y1, Y2
	VSUBPD Y2, Y0, Y0
	VMULPD expLn2L<>(SB), Y1, Y2
	VSUBPD Y2, Y0, Y0
	VMULPD sixteenth<>(SB), Y0, Y0
	VMULPD inv8f<>(SB), Y0, Y2
	VADDPD inv7f<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD inv6f<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD inv5f<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD inv4f<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD inv3f<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD half<>(SB), Y2, Y2
	VMULPD Y0, Y2, Y2
	VADDPD one<>(SB), Y2, Y2
	VMULPD Y2, Y0, Y0
	VADDPD two<>(SB), Y0, Y2
	VMULPD Y2, Y0, Y0
	VADDPD two<>(SB), Y0, Y2
	VMULPD Y2, Y0, Y0
	VADDPD two<>(SB), Y0, Y2
	VMULPD Y2, Y0, Y0
	VADDPD two<>(SB), Y0, Y2
	VMULPD Y2, Y0, Y0
	VADDPD one<>(SB), Y0, Y0
	EXPSCALE(Y0, Y1, Y3)
	CHECK
	CMPQ AX, $15
	JNE  plainDone
	VMOVUPD Y0, (DI)(BX*8)
	ADDQ $4, BX
	JMP  plainLoop

plainDone:
	MOVQ BX, ret+32(FP)
	VZEROUPPER
	RET

// func expLogFMA(dst, xs unsafe.Pointer, n int, y float64) int
//
// The exponential with fused operations where math.Exp fuses: t =
// fma(-k, ln2U, t); t = fma(-k, ln2L, t); r = t/16; p = Horner in r by
// fma; e = r*p; three times e = e*(e+2); e = fma(e+2, e, 1); times 2^k.
TEXT ·expLogFMA(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ xs+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD y+24(FP), Y15
	XORQ BX, BX

fmaLoop:
	CMPQ BX, CX
	JGE  fmaDone
	VMOVUPD (SI)(BX*8), Y7
	LOG
	EXPK
	EXPFMA(Y0, Y1, Y2, Y3)
	CHECK
	CMPQ AX, $15
	JNE  fmaDone
	VMOVUPD Y0, (DI)(BX*8)
	ADDQ $4, BX
	JMP  fmaLoop

fmaDone:
	MOVQ BX, ret+32(FP)
	VZEROUPPER
	RET

// LOG512 is LOG on eight lanes in Z registers (AVX-512F): the same
// operations in the same order; the bitwise ones as their integer forms,
// the split point's compare into K2 and its 1.0 by a zeroing masked move.
#define LOG512 \
	VPANDQ fracMask<>(SB), Z7, Z2; \
	VPORQ half<>(SB), Z2, Z2; \
	VPSRLQ $52, Z7, Z1; \
	VPORQ two52<>(SB), Z1, Z1; \
	VSUBPD two52exp<>(SB), Z1, Z1; \
	VCMPPD $2, sqrtHalf<>(SB), Z2, K2; \
	VMOVUPD.Z one<>(SB), K2, Z3; \
	LOGTAIL(Z1, Z2, Z3, Z4, Z5, Z6)

// EXPLOG512 sets Z0 = Exp(Z15*Log(Z7)) lane by lane as expLogFMA does,
// Z1 = k, and K1 the lanes that took the straight path of both
// functions (CHECK's four compares chained in K1). Clobbers Z2-Z6.
#define EXPLOG512 \
	LOG512; \
	VMULPD Z15, Z1, Z0; \
	VMULPD log2e<>(SB), Z0, Z1; \
	VCVTPD2DQ Z1, Y1; \
	VCVTDQ2PD Y1, Z1; \
	EXPFMA(Z0, Z1, Z2, Z3); \
	VCMPPD $13, minNormal<>(SB), Z7, K1; \
	VCMPPD $2, maxFinite<>(SB), Z7, K1, K1; \
	VCMPPD $13, minExp<>(SB), Z1, K1, K1; \
	VCMPPD $2, maxExp<>(SB), Z1, K1, K1

// func expLogAVX512(dst, xs unsafe.Pointer, n int, y float64) int
//
// expLogFMA on eight lanes (n a multiple of 8).
TEXT ·expLogAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ xs+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD y+24(FP), Z15
	XORQ BX, BX

loop512:
	CMPQ BX, CX
	JGE  done512
	VMOVUPD (SI)(BX*8), Z7
	EXPLOG512
	KMOVW K1, AX
	CMPQ AX, $255
	JNE  done512
	VMOVUPD Z0, (DI)(BX*8)
	ADDQ $8, BX
	JMP  loop512

done512:
	MOVQ BX, ret+32(FP)
	VZEROUPPER
	RET

// func weightsAVX512(dst, xs unsafe.Pointer, n int, d, y float64) int
//
// Weights' loop on eight lanes (n a multiple of 8): the ratio x/d, then
// expLogAVX512's work, then min(1, 1/e) (VMINPD returns its second
// operand, 1, unless 1/e is below it; 1/e is positive and finite on the
// straight path).
TEXT ·weightsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ xs+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD d+24(FP), Z14
	VBROADCASTSD y+32(FP), Z15
	XORQ BX, BX

wloop512:
	CMPQ BX, CX
	JGE  wdone512
	VMOVUPD (SI)(BX*8), Z7
	VDIVPD  Z14, Z7, Z7
	EXPLOG512
	KMOVW K1, AX
	CMPQ AX, $255
	JNE  wdone512
	VMOVUPD one<>(SB), Z2
	VDIVPD  Z0, Z2, Z0
	VMINPD  one<>(SB), Z0, Z0
	VMOVUPD Z0, (DI)(BX*8)
	ADDQ $8, BX
	JMP  wloop512

wdone512:
	MOVQ BX, ret+40(FP)
	VZEROUPPER
	RET
