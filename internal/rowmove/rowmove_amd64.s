//go:build amd64 && !purego

#include "textflag.h"

// func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64)
//
// Row i: AX = src + idx[i]*stride; the size class (chosen once) moves
// the row's bytes as overlapping words: the first and last word of the
// class's width cover any size within the class. Every load of a row
// precedes its stores.
TEXT ·rows(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ idx_base+16(FP), BX
	MOVQ idx_len+24(FP), CX
	MOVQ stride+40(FP), DX
	MOVQ size+48(FP), R8
	TESTQ CX, CX
	JEQ done
	CMPQ R8, $4
	JEQ loop4
	CMPQ R8, $8
	JEQ loop8
	JB loop5to7
	CMPQ R8, $16
	JBE loop9to16
	CMPQ R8, $32
	JBE loop17to32
	CMPQ R8, $64
	JBE loop33to64
	JMP loop65to128

loop4:
	MOVQ (BX), AX
	IMULQ DX, AX
	MOVL (SI)(AX*1), R9
	MOVL R9, (DI)
	ADDQ $4, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop4
	RET

loop8:
	MOVQ (BX), AX
	IMULQ DX, AX
	MOVQ (SI)(AX*1), R9
	MOVQ R9, (DI)
	ADDQ $8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop8
	RET

loop5to7:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	MOVL (AX), R9
	MOVL -4(AX)(R8*1), R10
	MOVL R9, (DI)
	MOVL R10, -4(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop5to7
	RET

loop9to16:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	MOVQ (AX), R9
	MOVQ -8(AX)(R8*1), R10
	MOVQ R9, (DI)
	MOVQ R10, -8(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop9to16
	RET

loop17to32:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	MOVOU (AX), X0
	MOVOU -16(AX)(R8*1), X1
	MOVOU X0, (DI)
	MOVOU X1, -16(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop17to32
	RET

loop33to64:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	MOVOU (AX), X0
	MOVOU 16(AX), X1
	MOVOU -32(AX)(R8*1), X2
	MOVOU -16(AX)(R8*1), X3
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, -32(DI)(R8*1)
	MOVOU X3, -16(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop33to64
	RET

loop65to128:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	MOVOU (AX), X0
	MOVOU 16(AX), X1
	MOVOU 32(AX), X2
	MOVOU 48(AX), X3
	MOVOU -64(AX)(R8*1), X4
	MOVOU -48(AX)(R8*1), X5
	MOVOU -32(AX)(R8*1), X6
	MOVOU -16(AX)(R8*1), X7
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	MOVOU X4, -64(DI)(R8*1)
	MOVOU X5, -48(DI)(R8*1)
	MOVOU X6, -32(DI)(R8*1)
	MOVOU X7, -16(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE loop65to128

done:
	RET
