//go:build amd64 && !purego

#include "textflag.h"

// Lane offsets of the block counters: of fill16's two register sets (0..3,
// 4..7), and of fill64's first (0..7).
DATA lanes<>+0(SB)/8, $0
DATA lanes<>+8(SB)/8, $1
DATA lanes<>+16(SB)/8, $2
DATA lanes<>+24(SB)/8, $3
DATA lanes<>+32(SB)/8, $4
DATA lanes<>+40(SB)/8, $5
DATA lanes<>+48(SB)/8, $6
DATA lanes<>+56(SB)/8, $7
GLOBL lanes<>(SB), RODATA|NOPTR, $64

// ROUND is one Philox round of four blocks whose words c0..c3 are in the
// low halves of the 64-bit lanes of a0..a3 (Y12, Y13: the multipliers;
// Y14, Y15: the round's key words): a0 = hi(m1*c2)^c1^k0, a2 =
// hi(m0*c0)^c3^k1, and the new c1 and c3 (lo(m1*c2), lo(m0*c0)) are left
// in t1 and t0. The high halves of a1, a3, t0 and t1 hold garbage, which
// VPMULUDQ ignores and the final packing drops.
#define ROUND(a0, a1, a2, a3, t0, t1) \
	VPMULUDQ Y12, a0, t0; \
	VPMULUDQ Y13, a2, t1; \
	VPSRLQ $32, t1, a0; \
	VPXOR a1, a0, a0; \
	VPXOR Y14, a0, a0; \
	VPSRLQ $32, t0, a2; \
	VPXOR a3, a2, a2; \
	VPXOR Y15, a2, a2

// KEYS loads round r's key words.
#define KEYS(r) \
	VPBROADCASTQ (r*16)(DX), Y14; \
	VPBROADCASTQ (r*16+8)(DX), Y15

// EVEN and ODD run a round on both sets; the new c1, c3 alternate
// between (Y1, Y3) and (Y5, Y4) (set B: (Y7, Y9) and (Y11, Y10)).
#define EVEN(r) \
	KEYS(r); \
	ROUND(Y0, Y1, Y2, Y3, Y4, Y5); \
	ROUND(Y6, Y7, Y8, Y9, Y10, Y11)

#define ODD(r) \
	KEYS(r); \
	ROUND(Y0, Y5, Y2, Y4, Y3, Y1); \
	ROUND(Y6, Y11, Y8, Y10, Y9, Y7)

// STORE writes the 8 draws of one set: c0|c1<<32 and c2|c3<<32 of each
// block, block by block, at off(DI).
#define STORE(c0, c1, c2, c3, off) \
	VPSLLQ $32, c1, c1; \
	VPBLENDD $0xAA, c1, c0, c0; \
	VPSLLQ $32, c3, c3; \
	VPBLENDD $0xAA, c3, c2, c2; \
	VPUNPCKLQDQ c2, c0, c1; \
	VPUNPCKHQDQ c2, c0, c3; \
	VPERM2I128 $0x20, c3, c1, c0; \
	VPERM2I128 $0x31, c3, c1, c2; \
	VMOVDQU c0, off(DI); \
	VMOVDQU c2, (off+32)(DI)

// ARGS loads the arguments of fill16 and fill64 (DI: dst, CX: n, AX: x,
// R8: stream, R9: c0, R10: c1, DX: keys), returns at done when n is 0,
// and leaves the multipliers in X12 and X13 for broadcasting.
#define ARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ n+8(FP), CX; \
	MOVL x+16(FP), AX; \
	MOVL stream+20(FP), R8; \
	MOVL c0+24(FP), R9; \
	MOVL c1+28(FP), R10; \
	MOVQ keys+32(FP), DX; \
	TESTQ CX, CX; \
	JEQ done; \
	MOVQ $0xD2511F53, R11; \
	MOVQ R11, X12; \
	MOVQ $0xCD9E8D57, R11; \
	MOVQ R11, X13

// func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)
TEXT ·fill16(SB), NOSPLIT, $0-40
	ARGS
	VPBROADCASTQ X12, Y12
	VPBROADCASTQ X13, Y13

loop:
	MOVQ AX, X0
	VPBROADCASTQ X0, Y0
	VPADDQ lanes<>+32(SB), Y0, Y6
	VPADDQ lanes<>+0(SB), Y0, Y0
	MOVQ R8, X1
	VPBROADCASTQ X1, Y1
	VMOVDQU Y1, Y7
	MOVQ R9, X2
	VPBROADCASTQ X2, Y2
	VMOVDQU Y2, Y8
	MOVQ R10, X3
	VPBROADCASTQ X3, Y3
	VMOVDQU Y3, Y9

	EVEN(0)
	ODD(1)
	EVEN(2)
	ODD(3)
	EVEN(4)
	ODD(5)
	EVEN(6)
	ODD(7)
	EVEN(8)
	ODD(9)

	STORE(Y0, Y1, Y2, Y3, 0)
	STORE(Y6, Y7, Y8, Y9, 64)

	ADDQ $128, DI
	ADDL $8, AX
	DECQ CX
	JNE loop
	VZEROUPPER

done:
	RET

// fill64, the AVX-512 loop.

// step8 is the counter distance between two register sets (8 blocks).
DATA step8<>+0(SB)/8, $8
GLOBL step8<>(SB), RODATA|NOPTR, $8

// Qword indices that interleave the even and odd draws of eight blocks:
// draws 0..7 (blocks 0..3), then draws 8..15 (blocks 4..7).
DATA inter<>+0(SB)/8, $0
DATA inter<>+8(SB)/8, $8
DATA inter<>+16(SB)/8, $1
DATA inter<>+24(SB)/8, $9
DATA inter<>+32(SB)/8, $2
DATA inter<>+40(SB)/8, $10
DATA inter<>+48(SB)/8, $3
DATA inter<>+56(SB)/8, $11
DATA inter<>+64(SB)/8, $4
DATA inter<>+72(SB)/8, $12
DATA inter<>+80(SB)/8, $5
DATA inter<>+88(SB)/8, $13
DATA inter<>+96(SB)/8, $6
DATA inter<>+104(SB)/8, $14
DATA inter<>+112(SB)/8, $7
DATA inter<>+120(SB)/8, $15
GLOBL inter<>(SB), RODATA|NOPTR, $128

// ROUNDZ is fill16's ROUND on eight blocks a register: the same
// multiplies and shifts, with each pair of XORs as one three-way
// VPTERNLOGQ (0x96: a ^ b ^ c).
#define ROUNDZ(a0, a1, a2, a3, t0, t1) \
	VPMULUDQ Z12, a0, t0; \
	VPMULUDQ Z13, a2, t1; \
	VPSRLQ $32, t1, a0; \
	VPTERNLOGQ $0x96, Z14, a1, a0; \
	VPSRLQ $32, t0, a2; \
	VPTERNLOGQ $0x96, Z15, a3, a2

#define KEYSZ(r) \
	VPBROADCASTQ (r*16)(DX), Z14; \
	VPBROADCASTQ (r*16+8)(DX), Z15

// EVENZ and ODDZ run a round on the four sets A (Z0..Z5), B (Z6..Z11),
// C (Z16..Z21) and D (Z22..Z27), alternating where c1 and c3 land as
// fill16's EVEN and ODD do.
#define EVENZ(r) \
	KEYSZ(r); \
	ROUNDZ(Z0, Z1, Z2, Z3, Z4, Z5); \
	ROUNDZ(Z6, Z7, Z8, Z9, Z10, Z11); \
	ROUNDZ(Z16, Z17, Z18, Z19, Z20, Z21); \
	ROUNDZ(Z22, Z23, Z24, Z25, Z26, Z27)

#define ODDZ(r) \
	KEYSZ(r); \
	ROUNDZ(Z0, Z5, Z2, Z4, Z3, Z1); \
	ROUNDZ(Z6, Z11, Z8, Z10, Z9, Z7); \
	ROUNDZ(Z16, Z21, Z18, Z20, Z19, Z17); \
	ROUNDZ(Z22, Z27, Z24, Z26, Z25, Z23)

// STOREZ writes the 16 draws of one set at off(DI): c0|c1<<32 (even
// draws) and c2|c3<<32 (odd draws) of each block, blended by K1 (odd
// dwords) and interleaved block by block by VPERMI2Q (Z28, Z29: the
// indices).
#define STOREZ(c0, c1, c2, c3, off) \
	VPSLLQ $32, c1, c1; \
	VPBLENDMD c1, c0, K1, c0; \
	VPSLLQ $32, c3, c3; \
	VPBLENDMD c3, c2, K1, c2; \
	VMOVDQU64 Z28, c1; \
	VPERMI2Q c2, c0, c1; \
	VMOVDQU64 Z29, c3; \
	VPERMI2Q c2, c0, c3; \
	VMOVDQU64 c1, off(DI); \
	VMOVDQU64 c3, (off+64)(DI)

// func fill64(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)
TEXT ·fill64(SB), NOSPLIT, $0-40
	ARGS
	VPBROADCASTQ X12, Z12
	VPBROADCASTQ X13, Z13
	MOVQ $0xAAAA, R11
	KMOVW R11, K1
	VMOVDQU64 inter<>+0(SB), Z28
	VMOVDQU64 inter<>+64(SB), Z29
	VPBROADCASTQ step8<>+0(SB), Z30
	MOVQ R8, X1
	VPBROADCASTQ X1, Z31 // stream

loop:
	MOVQ AX, X0
	VPBROADCASTQ X0, Z0
	VPADDQ lanes<>+0(SB), Z0, Z0
	VPADDQ Z30, Z0, Z6
	VPADDQ Z30, Z6, Z16
	VPADDQ Z30, Z16, Z22
	VMOVDQA64 Z31, Z1
	VMOVDQA64 Z31, Z7
	VMOVDQA64 Z31, Z17
	VMOVDQA64 Z31, Z23
	MOVQ R9, X2
	VPBROADCASTQ X2, Z2
	VMOVDQA64 Z2, Z8
	VMOVDQA64 Z2, Z18
	VMOVDQA64 Z2, Z24
	MOVQ R10, X3
	VPBROADCASTQ X3, Z3
	VMOVDQA64 Z3, Z9
	VMOVDQA64 Z3, Z19
	VMOVDQA64 Z3, Z25

	EVENZ(0)
	ODDZ(1)
	EVENZ(2)
	ODDZ(3)
	EVENZ(4)
	ODDZ(5)
	EVENZ(6)
	ODDZ(7)
	EVENZ(8)
	ODDZ(9)

	STOREZ(Z0, Z1, Z2, Z3, 0)
	STOREZ(Z6, Z7, Z8, Z9, 128)
	STOREZ(Z16, Z17, Z18, Z19, 256)
	STOREZ(Z22, Z23, Z24, Z25, 384)

	ADDQ $512, DI
	ADDL $32, AX
	DECQ CX
	JNE loop
	VZEROUPPER

done:
	RET
