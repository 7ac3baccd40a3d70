//go:build amd64 && !purego

#include "textflag.h"

// func ntCopy(dst, src unsafe.Pointer, n int64)
// Copies n bytes (a multiple of 64) from src to dst (32-byte aligned)
// with non-temporal stores.
TEXT ·ntCopy(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $6, CX
	JZ   done

loop:
	VMOVDQU  0(SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	ADDQ     $64, SI
	ADDQ     $64, DI
	DECQ     CX
	JNZ      loop
	VZEROUPPER

done:
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
