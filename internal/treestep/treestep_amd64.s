//go:build amd64 && !purego

#include "textflag.h"

DATA signbit<>+0(SB)/8, $0x8000000000000000
GLOBL signbit<>(SB), RODATA|NOPTR, $8

DATA zero<>+0(SB)/8, $0
GLOBL zero<>(SB), RODATA|NOPTR, $8

// func levelAVX2(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int
TEXT ·levelAVX2(SB), NOSPLIT, $0-56
	MOVQ level+0(FP), R8
	MOVQ groups+8(FP), R9
	MOVQ us+16(FP), SI
	MOVQ out+24(FP), DI
	MOVQ start+32(FP), DX
	MOVQ n+40(FP), CX
	VPBROADCASTQ signbit<>(SB), Y15
	LEAQ zero<>(SB), R14

loop:
	CMPQ DX, CX
	JGE  done
	MOVLQSX (DI)(DX*4), AX // the draw's group g
	CMPQ AX, R9            // unsigned: a negative g is past the level too
	JAE  done
	MOVQ AX, R10
	SHLQ $6, R10
	ADDQ R8, R10           // R10 = &level[8g]

	// The sums greater than the mass, as signed compares of sign-flipped
	// bits (the unsigned order).
	VPBROADCASTQ (SI)(DX*8), Y0
	VPXOR        Y15, Y0, Y0
	VPXOR        (R10), Y15, Y1
	VPXOR        32(R10), Y15, Y2
	VPCMPGTQ     Y0, Y1, Y1
	VPCMPGTQ     Y0, Y2, Y2
	VMOVMSKPD    Y1, R11
	VMOVMSKPD    Y2, R12
	SHLQ         $4, R12
	ORQ          R12, R11
	POPCNTQ      R11, R11
	MOVQ         $8, R12
	SUBQ         R11, R12 // j: the sums at or below the mass
	CMPQ         R12, $8
	JEQ          done

	// Less the sum before j (+0 for j = 0: the address of a zero, so
	// nothing before the group is read).
	LEAQ    -8(R10)(R12*8), R13
	TESTQ   R12, R12
	CMOVQEQ R14, R13
	MOVSD   (SI)(DX*8), X3
	SUBSD   (R13), X3
	MOVSD   X3, (SI)(DX*8)

	SHLQ $3, AX
	ADDQ R12, AX
	MOVL AX, (DI)(DX*4)
	INCQ DX
	JMP  loop

done:
	VZEROUPPER
	MOVQ DX, ret+48(FP)
	RET

// func levelAVX512(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int
//
// levelAVX2 with one 512-bit unsigned compare into a mask register: no
// sign flips, no joining of two halves. Running sums do not decrease, so
// the mask's low bit is set exactly when j > 0, and a subtraction masked
// by it takes the sum before j or leaves the mass as it is (for j = 0 its
// load, the 8 bytes before the group, is masked out: an EVEX masked load
// does not fault on a masked-out element; tensorbuf's tree levels also
// have their own memory there). Computing an index that stays inside the
// group instead ((j-1)&7, or the count of the mask shifted right) is
// slower (BenchmarkLevel).
TEXT ·levelAVX512(SB), NOSPLIT, $0-56
	MOVQ level+0(FP), R8
	MOVQ groups+8(FP), R9
	MOVQ us+16(FP), SI
	MOVQ out+24(FP), DI
	MOVQ start+32(FP), DX
	MOVQ n+40(FP), CX
	CMPQ DX, CX
	JGE  done512

loop512:
	MOVLQSX (DI)(DX*4), AX // the draw's group g
	CMPQ    AX, R9         // unsigned: a negative g is past the level too
	JAE     done512
	MOVQ    AX, R10
	SHLQ    $6, R10
	ADDQ    R8, R10        // R10 = &level[8g]

	// K1: the sums at or below the mass (unsigned compare of the bits).
	VPBROADCASTQ (SI)(DX*8), Z0
	VPCMPUQ      $5, (R10), Z0, K1 // mass >= sum
	KMOVW        K1, R11
	POPCNTL      R11, R11          // j
	CMPQ         R11, $8
	JEQ          done512

	VSUBSD -8(R10)(R11*8), X0, K1, X0 // less the sum before j, where j > 0
	VMOVSD X0, (SI)(DX*8)

	LEAQ (R11)(AX*8), AX
	MOVL AX, (DI)(DX*4)
	INCQ DX
	CMPQ DX, CX
	JLT  loop512

done512:
	VZEROUPPER
	MOVQ DX, ret+48(FP)
	RET
