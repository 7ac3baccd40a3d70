//go:build amd64 && !purego

#include "textflag.h"

// func stepAVX(w, grad, m, v unsafe.Pointer, n int, c *Coeffs)
//
// Coeffs is eight float32s: Beta1, Beta2, OneMinusBeta1, OneMinusBeta2,
// C1, C2, Eps, NegLR at offsets 0, 4, ..., 28, broadcast into Y8..Y15.
// The operations and their order are scalar's, one rounding each.
TEXT ·stepAVX(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	VBROADCASTSS 0(AX), Y8   // beta1
	VBROADCASTSS 4(AX), Y9   // beta2
	VBROADCASTSS 8(AX), Y10  // 1-beta1
	VBROADCASTSS 12(AX), Y11 // 1-beta2
	VBROADCASTSS 16(AX), Y12 // c1
	VBROADCASTSS 20(AX), Y13 // c2
	VBROADCASTSS 24(AX), Y14 // eps
	VBROADCASTSS 28(AX), Y15 // -lr
	VXORPS Y7, Y7, Y7
	XORQ BX, BX

loop:
	VMOVUPS (SI)(BX*4), Y0       // g
	VMULPS Y10, Y0, Y1           // t1 = g*(1-beta1)
	VMULPS Y0, Y0, Y2            // g*g
	VMULPS Y11, Y2, Y2           // g2 = (g*g)*(1-beta2)
	VMOVUPS (R8)(BX*4), Y3       // m
	VMULPS Y8, Y3, Y3            // m*beta1
	VADDPS Y1, Y3, Y3            // m = m*beta1 + t1
	VMOVUPS Y3, (R8)(BX*4)
	VMOVUPS (R9)(BX*4), Y4       // v
	VMULPS Y9, Y4, Y4            // v*beta2
	VADDPS Y2, Y4, Y4            // v = v*beta2 + g2
	VMOVUPS Y4, (R9)(BX*4)
	VMULPS Y12, Y3, Y3           // m*c1
	VMULPS Y15, Y3, Y3           // mh = (m*c1)*(-lr)
	VMULPS Y13, Y4, Y4           // v*c2
	VSQRTPS Y4, Y4               // sqrt(v*c2)
	VADDPS Y14, Y4, Y4           // vh = sqrt(v*c2) + eps
	VDIVPS Y4, Y3, Y3            // mh/vh
	VMOVUPS (DI)(BX*4), Y5
	VADDPS Y3, Y5, Y5            // w += mh/vh
	VMOVUPS Y5, (DI)(BX*4)
	VMOVUPS Y7, (SI)(BX*4)       // g = 0
	ADDQ $8, BX
	CMPQ BX, CX
	JLT loop
	VZEROUPPER
	RET

// func stepAVX512(w, grad, m, v unsafe.Pointer, n int, c *Coeffs)
//
// stepAVX sixteen lanes at a time (n a positive multiple of 16).
TEXT ·stepAVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	VBROADCASTSS 0(AX), Z8   // beta1
	VBROADCASTSS 4(AX), Z9   // beta2
	VBROADCASTSS 8(AX), Z10  // 1-beta1
	VBROADCASTSS 12(AX), Z11 // 1-beta2
	VBROADCASTSS 16(AX), Z12 // c1
	VBROADCASTSS 20(AX), Z13 // c2
	VBROADCASTSS 24(AX), Z14 // eps
	VBROADCASTSS 28(AX), Z15 // -lr
	VXORPS Z7, Z7, Z7
	XORQ BX, BX

loop512:
	VMOVUPS (SI)(BX*4), Z0       // g
	VMULPS Z10, Z0, Z1           // t1 = g*(1-beta1)
	VMULPS Z0, Z0, Z2            // g*g
	VMULPS Z11, Z2, Z2           // g2 = (g*g)*(1-beta2)
	VMOVUPS (R8)(BX*4), Z3       // m
	VMULPS Z8, Z3, Z3            // m*beta1
	VADDPS Z1, Z3, Z3            // m = m*beta1 + t1
	VMOVUPS Z3, (R8)(BX*4)
	VMOVUPS (R9)(BX*4), Z4       // v
	VMULPS Z9, Z4, Z4            // v*beta2
	VADDPS Z2, Z4, Z4            // v = v*beta2 + g2
	VMOVUPS Z4, (R9)(BX*4)
	VMULPS Z12, Z3, Z3           // m*c1
	VMULPS Z15, Z3, Z3           // mh = (m*c1)*(-lr)
	VMULPS Z13, Z4, Z4           // v*c2
	VSQRTPS Z4, Z4               // sqrt(v*c2)
	VADDPS Z14, Z4, Z4           // vh = sqrt(v*c2) + eps
	VDIVPS Z4, Z3, Z3            // mh/vh
	VMOVUPS (DI)(BX*4), Z5
	VADDPS Z3, Z5, Z5            // w += mh/vh
	VMOVUPS Z5, (DI)(BX*4)
	VMOVUPS Z7, (SI)(BX*4)       // g = 0
	ADDQ $16, BX
	CMPQ BX, CX
	JLT loop512
	VZEROUPPER
	RET
