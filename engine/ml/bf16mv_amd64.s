// Hand-written: gemvF16x8 (f16mv_amd64.s) with the bf16 widening in place of VCVTPH2PS.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// One full 16-lane step of one row: widen (a bf16 is the high half of
// its float32, so the conversion is exact) and accumulate.
#define BF16STEP(row, t, acc) \
	VPMOVZXWD   (row)(AX*1), t \
	VPSLLD      $16, t, t \
	VFMADD231PS t, Z8, acc

// The masked tail step of one row.
#define BF16TAIL(row, acc) \
	VMOVDQU16.Z (row)(AX*1), K1, Y9 \
	VPMOVZXWD   Y9, Z9 \
	VPSLLD      $16, Z9, Z9 \
	VFMADD231PS Z9, Z8, acc

// func gemvBF16x8(x *float32, w *byte, ws int, k int, dst *float32, nw int)
// gemvF16x8 over bf16 rows (nw a multiple of 8): per output the same FMA
// chain over k, masked tail and REDUCE4, so results equal gemvF32's and
// gemmF32x4's on the decoded rows bit for bit (what the tile path of a
// batch computes).
TEXT ·gemvBF16x8(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $5, R9          // R9 = bytes of bf16 in whole 16-lane steps
	TAILMASK
	LEAQ (R8)(R8*2), R14

b8row:
	CMPQ nw+40(FP), $8
	JLT  b8done
	MOVQ ·f16PfRows(SB), R10 // prefetched through this pass: the rows
	IMULQ R8, R10            // f16PfRows on (0: the rows being read)
	ADDQ DI, R10
	LEAQ (DI)(R8*1), R11
	LEAQ (DI)(R8*2), R13
	LEAQ (DI)(R14*1), R15
	LEAQ (DI)(R8*4), R12
	LEAQ (R12)(R8*1), CX
	LEAQ (R12)(R8*2), DX
	LEAQ (R12)(R14*1), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ   AX, AX        // bf16 byte offset; the x offset is twice it

b8loop:
	CMPQ    AX, R9
	JGE     b8tail
	VMOVUPS (SI)(AX*2), Z8
	BF16STEP(DI, Z9, Z0)
	BF16STEP(R11, Z10, Z1)
	BF16STEP(R13, Z11, Z2)
	BF16STEP(R15, Z12, Z3)
	BF16STEP(R12, Z13, Z4)
	BF16STEP(CX, Z14, Z5)
	BF16STEP(DX, Z15, Z6)
	BF16STEP(BX, Z17, Z7)
	PREFETCHT1 (R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	ADDQ    $256, R10
	ADDQ    $32, AX
	JMP     b8loop

b8tail:
	KORTESTW K1, K1
	JZ       b8reduce
	VMOVUPS.Z (SI)(AX*2), K1, Z8
	BF16TAIL(DI, Z0)
	BF16TAIL(R11, Z1)
	BF16TAIL(R13, Z2)
	BF16TAIL(R15, Z3)
	BF16TAIL(R12, Z4)
	BF16TAIL(CX, Z5)
	BF16TAIL(DX, Z6)
	BF16TAIL(BX, Z7)

b8reduce:
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7)
	MOVQ    dst+32(FP), AX
	VMOVUPS X0, (AX)
	VMOVUPS X4, 16(AX)
	ADDQ    $32, AX
	MOVQ    AX, dst+32(FP)
	LEAQ    (DI)(R8*8), DI
	SUBQ    $8, nw+40(FP)
	JMP     b8row

b8done:
	VZEROUPPER
	RET
