//go:build amd64 && !purego

#include "textflag.h"

// func cols(cs unsafe.Pointer, n int, idx []int64, first int64)
//
// Column j of cs (a Col: Dst, Src, Stride, Size, 32 bytes) moves rows
// idx to Dst+(first+i)*Size; R11 walks the columns, R12 counts them.
// Row i: AX = Src + idx[i]*Stride; the size class (chosen once per
// column) moves the row's bytes as overlapping words: the first and last
// word of the class's width cover any size within the class; with
// useAVX2 set, rows of 33 to 128 bytes move as 32-byte words. Every load
// of a row precedes its stores. (rows is one column of it.)
TEXT ·cols(SB), NOSPLIT, $0-48
	MOVQ cs+0(FP), R11
	MOVQ n+8(FP), R12
	TESTQ R12, R12
	JEQ cdone
	MOVQ idx_len+24(FP), CX
	TESTQ CX, CX
	JEQ cdone

ccol:
	MOVQ 0(R11), DI
	MOVQ 8(R11), SI
	MOVQ 16(R11), DX
	MOVQ 24(R11), R8
	MOVQ first+40(FP), AX
	IMULQ R8, AX
	ADDQ AX, DI
	MOVQ idx_base+16(FP), BX
	MOVQ idx_len+24(FP), CX
	CMPQ R8, $4
	JEQ cloop4
	CMPQ R8, $8
	JEQ cloop8
	JB cloop5to7
	CMPQ R8, $16
	JBE cloop9to16
	CMPQ R8, $32
	JBE cloop17to32
	CMPB ·useAVX2(SB), $1
	JEQ cwide
	CMPQ R8, $64
	JBE cloop33to64
	JMP cloop65to128

cwide:
	CMPQ R8, $64
	JBE cloop33to64avx
	JMP cloop65to128avx

cloop4:
	MOVQ (BX), AX
	IMULQ DX, AX
	MOVL (SI)(AX*1), R9
	MOVL R9, (DI)
	ADDQ $4, DI
	ADDQ $8, BX
	DECQ CX
	JNE cloop4
	JMP cnext

cloop8:
	MOVQ (BX), AX
	IMULQ DX, AX
	MOVQ (SI)(AX*1), R9
	MOVQ R9, (DI)
	ADDQ $8, DI
	ADDQ $8, BX
	DECQ CX
	JNE cloop8
	JMP cnext

cloop5to7:
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
	JNE cloop5to7
	JMP cnext

cloop9to16:
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
	JNE cloop9to16
	JMP cnext

cloop17to32:
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
	JNE cloop17to32
	JMP cnext

cloop33to64:
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
	JNE cloop33to64
	JMP cnext

cloop65to128:
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
	JNE cloop65to128
	JMP cnext

// The two widest classes with 32-byte words (AVX2).
cloop33to64avx:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	VMOVDQU (AX), Y0
	VMOVDQU -32(AX)(R8*1), Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, -32(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE cloop33to64avx
	JMP cnext

cloop65to128avx:
	MOVQ (BX), AX
	IMULQ DX, AX
	ADDQ SI, AX
	VMOVDQU (AX), Y0
	VMOVDQU 32(AX), Y1
	VMOVDQU -64(AX)(R8*1), Y2
	VMOVDQU -32(AX)(R8*1), Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, -64(DI)(R8*1)
	VMOVDQU Y3, -32(DI)(R8*1)
	ADDQ R8, DI
	ADDQ $8, BX
	DECQ CX
	JNE cloop65to128avx
	JMP cnext

cnext:
	ADDQ $32, R11
	DECQ R12
	JNE ccol
	CMPB ·useAVX2(SB), $1
	JNE cdone
	VZEROUPPER

cdone:
	RET

// func rowsRep(dst, src unsafe.Pointer, idx []int64, stride, size int64)
//
// Row i moves by REP MOVSB from src+idx[i]*stride to dst+i*size.
TEXT ·rowsRep(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), R8
	MOVQ src+8(FP), R9
	MOVQ idx_base+16(FP), BX
	MOVQ idx_len+24(FP), R10
	MOVQ stride+40(FP), DX
	MOVQ size+48(FP), R11
	TESTQ R10, R10
	JEQ rdone

rloop:
	MOVQ (BX), SI
	IMULQ DX, SI
	ADDQ R9, SI
	MOVQ R8, DI
	MOVQ R11, CX
	REP; MOVSB
	ADDQ R11, R8
	ADDQ $8, BX
	DECQ R10
	JNE rloop

rdone:
	RET
