//go:build amd64 && !purego

#include "textflag.h"

// func rows(base unsafe.Pointer, idx []int64, stride, span int64)
TEXT ·rows(SB), NOSPLIT, $0-48
	MOVQ base+0(FP), AX
	MOVQ idx_base+8(FP), BX
	MOVQ idx_len+16(FP), CX
	MOVQ stride+32(FP), DX
	MOVQ span+40(FP), SI
	DECQ SI
loop:
	MOVQ (BX), DI
	IMULQ DX, DI
	ADDQ AX, DI
	PREFETCHT0 (DI)
	PREFETCHT0 (DI)(SI*1)
	ADDQ $8, BX
	DECQ CX
	JNE loop
	RET

// func rows32(base unsafe.Pointer, idx []int32, stride int64)
TEXT ·rows32(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), AX
	MOVQ idx_base+8(FP), BX
	MOVQ idx_len+16(FP), CX
	MOVQ stride+32(FP), DX
loop32:
	MOVLQSX (BX), DI
	IMULQ DX, DI
	PREFETCHT0 (AX)(DI*1)
	ADDQ $4, BX
	DECQ CX
	JNE loop32
	RET

// func span(p unsafe.Pointer, n int64)
TEXT ·span(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	PREFETCHT0 -1(AX)(CX*1)
sloop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JGT sloop
	RET
