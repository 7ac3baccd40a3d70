//go:build amd64 && !purego

#include "textflag.h"

// Lane offsets of the block counters of the two register sets.
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

// func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)
TEXT ·fill16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	MOVL x+16(FP), AX
	MOVL stream+20(FP), R8
	MOVL c0+24(FP), R9
	MOVL c1+28(FP), R10
	MOVQ keys+32(FP), DX
	TESTQ CX, CX
	JEQ done
	MOVQ $0xD2511F53, R11
	MOVQ R11, X12
	VPBROADCASTQ X12, Y12
	MOVQ $0xCD9E8D57, R11
	MOVQ R11, X13
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
