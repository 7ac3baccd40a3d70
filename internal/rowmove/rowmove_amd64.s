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

// The size classes past 4 and 8 bytes: a row moves as its first and last
// word (TWO), or its first and last two (FOUR) or four (EIGHT) words, of
// w bytes each, with MOV (loads, then stores); then the loop goes to the
// next row, back to again, or on to the next column.
#define NEXT(again) \
	ADDQ R8, DI; \
	ADDQ $8, BX; \
	DECQ CX; \
	JNE again; \
	JMP cnext

#define ROW \
	MOVQ (BX), AX; \
	IMULQ DX, AX; \
	ADDQ SI, AX

#define TWO(MOV, a, b, w, again) \
	ROW; \
	MOV (AX), a; \
	MOV (-w)(AX)(R8*1), b; \
	MOV a, (DI); \
	MOV b, (-w)(DI)(R8*1); \
	NEXT(again)

#define FOUR(MOV, a, b, c, d, w, again) \
	ROW; \
	MOV (AX), a; \
	MOV w(AX), b; \
	MOV (-2*w)(AX)(R8*1), c; \
	MOV (-w)(AX)(R8*1), d; \
	MOV a, (DI); \
	MOV b, w(DI); \
	MOV c, (-2*w)(DI)(R8*1); \
	MOV d, (-w)(DI)(R8*1); \
	NEXT(again)

#define EIGHT(MOV, w, again) \
	ROW; \
	MOV (AX), X0; \
	MOV w(AX), X1; \
	MOV (2*w)(AX), X2; \
	MOV (3*w)(AX), X3; \
	MOV (-4*w)(AX)(R8*1), X4; \
	MOV (-3*w)(AX)(R8*1), X5; \
	MOV (-2*w)(AX)(R8*1), X6; \
	MOV (-w)(AX)(R8*1), X7; \
	MOV X0, (DI); \
	MOV X1, w(DI); \
	MOV X2, (2*w)(DI); \
	MOV X3, (3*w)(DI); \
	MOV X4, (-4*w)(DI)(R8*1); \
	MOV X5, (-3*w)(DI)(R8*1); \
	MOV X6, (-2*w)(DI)(R8*1); \
	MOV X7, (-w)(DI)(R8*1); \
	NEXT(again)

cloop5to7:
	TWO(MOVL, R9, R10, 4, cloop5to7)

cloop9to16:
	TWO(MOVQ, R9, R10, 8, cloop9to16)

cloop17to32:
	TWO(MOVOU, X0, X1, 16, cloop17to32)

cloop33to64:
	FOUR(MOVOU, X0, X1, X2, X3, 16, cloop33to64)

cloop65to128:
	EIGHT(MOVOU, 16, cloop65to128)

// The two widest classes with 32-byte words (AVX2).
cloop33to64avx:
	TWO(VMOVDQU, Y0, Y1, 32, cloop33to64avx)

cloop65to128avx:
	FOUR(VMOVDQU, Y0, Y1, Y2, Y3, 32, cloop65to128avx)

cnext:
	ADDQ $32, R11
	DECQ R12
	JNE ccol
	CMPB ·useAVX2(SB), $1
	JNE cdone
	VZEROUPPER

cdone:
	RET

// func rowsRepAhead(dst, src unsafe.Pointer, idx, pf []int64, stride, size int64, pfBase unsafe.Pointer, pfStride, pfSpan int64)
//
// Row i: while i < len(pf), PREFETCHT0 of record pf[i] (pfBase +
// pf[i]*pfStride: every 64th byte of its pfSpan and the last); then REP
// MOVSB from src+idx[i]*stride to dst+i*size. R12 walks pf, R13 counts
// what is left of it. (rowsRep is this loop with pf empty.)
TEXT ·rowsRepAhead(SB), NOSPLIT, $0-104
	MOVQ dst+0(FP), R8
	MOVQ src+8(FP), R9
	MOVQ idx_base+16(FP), BX
	MOVQ idx_len+24(FP), R10
	MOVQ pf_base+40(FP), R12
	MOVQ pf_len+48(FP), R13
	MOVQ stride+64(FP), DX
	MOVQ size+72(FP), R11
	TESTQ R10, R10
	JEQ adone

aloop:
	TESTQ R13, R13
	JEQ acopy
	MOVQ (R12), AX
	IMULQ pfStride+88(FP), AX
	ADDQ pfBase+80(FP), AX
	MOVQ pfSpan+96(FP), CX
	PREFETCHT0 -1(AX)(CX*1)

alines:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JGT alines
	ADDQ $8, R12
	DECQ R13

acopy:
	MOVQ (BX), SI
	IMULQ DX, SI
	ADDQ R9, SI
	MOVQ R8, DI
	MOVQ R11, CX
	REP; MOVSB
	ADDQ R11, R8
	ADDQ $8, BX
	DECQ R10
	JNE aloop

adone:
	RET
