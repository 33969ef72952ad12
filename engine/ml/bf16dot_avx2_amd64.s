// Hand-written: the AVX2 emulation of the BF16 products' VDPBF16PS
// arithmetic (bf16dot.go) for CPUs without AVX-512.

//go:build amd64 && !purego

#include "textflag.h"

// func bf16LanesAVX2(x *byte, w *byte, ws int, nc int, lanes *float32, nw int)
// For each of nw weight rows (ws bytes apart): the 16 f32 lanes of
// dotBF16Ref over the first nc whole 32-value chunks of x and the row,
// before the reduction, stored at lanes+64*row (bf16DotLanes finishes
// them). Lanes 0-7 in Y0, 8-15 in Y1; the odd elements (high halves)
// first, each an FMA with MXCSR DAZ|FTZ, restored before returning (an
// assembly function is not preempted asynchronously).
TEXT ·bf16LanesAVX2(SB), NOSPLIT, $8-48
	STMXCSR old-4(SP)
	MOVL    old-4(SP), AX
	ORL     $0x8040, AX
	MOVL    AX, new-8(SP)
	LDMXCSR new-8(SP)
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), R8
	MOVQ nc+24(FP), R9
	SHLQ $6, R9          // R9 = bytes of the whole chunks
	MOVQ lanes+32(FP), DX
	MOVQ nw+40(FP), R11
	MOVL         $0xffff0000, AX
	MOVD         AX, X15
	VPBROADCASTD X15, Y15

arow:
	TESTQ R11, R11
	JZ    adone
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ  AX, AX

aloop:
	CMPQ AX, R9
	JGE  astore
	VMOVDQU 0(SI)(AX*1), Y2
	VMOVDQU 0(DI)(AX*1), Y3
	VPAND   Y15, Y2, Y4
	VPAND   Y15, Y3, Y5
	VPSLLD  $16, Y2, Y2
	VPSLLD  $16, Y3, Y3
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y3, Y2, Y0
	VMOVDQU 32(SI)(AX*1), Y2
	VMOVDQU 32(DI)(AX*1), Y3
	VPAND   Y15, Y2, Y4
	VPAND   Y15, Y3, Y5
	VPSLLD  $16, Y2, Y2
	VPSLLD  $16, Y3, Y3
	VFMADD231PS Y5, Y4, Y1
	VFMADD231PS Y3, Y2, Y1
	ADDQ $64, AX
	JMP  aloop

astore:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    $64, DX
	ADDQ    R8, DI
	DECQ    R11
	JMP     arow

adone:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET

// func bf16Lanes2x4AVX2(x *byte, xs int, w *byte, ws int, nc int, lanes *float32, nw int)
// bf16LanesAVX2 for two activation rows (xs bytes apart) and nw weight rows
// (a multiple of 4) at once: the lanes of activation row i and weight row
// r at lanes+64*(i*nw+r). Four weight rows a pass, each output's lanes
// 0-7 over all chunks, then lanes 8-15 (eight accumulators, Y0-Y3 row 0
// and Y4-Y7 row 1); each lane's chain is bf16LanesAVX2's.
TEXT ·bf16Lanes2x4AVX2(SB), NOSPLIT, $8-56
	STMXCSR old-4(SP)
	MOVL    old-4(SP), AX
	ORL     $0x8040, AX
	MOVL    AX, new-8(SP)
	LDMXCSR new-8(SP)
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), BX
	ADDQ SI, BX
	MOVQ w+16(FP), DI
	MOVQ ws+24(FP), R8
	MOVQ nc+32(FP), R9
	SHLQ $6, R9          // R9 = bytes of the whole chunks
	MOVQ lanes+40(FP), DX
	MOVQ nw+48(FP), R11
	MOVQ R11, R10
	SHLQ $6, R10         // R10 = lane bytes of one activation row
	MOVL         $0xffff0000, AX
	MOVD         AX, X15
	VPBROADCASTD X15, Y15

bgrp:
	TESTQ R11, R11
	JZ    bdone
	LEAQ  (DI)(R8*1), R13
	LEAQ  (DI)(R8*2), R14
	LEAQ  (R13)(R8*2), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	XORQ  AX, AX

bloop0:
	CMPQ AX, R9
	JGE  bstore0
	VMOVDQU 0(SI)(AX*1), Y8
	VMOVDQU 0(BX)(AX*1), Y10
	VPAND   Y15, Y8, Y9
	VPAND   Y15, Y10, Y11
	VPSLLD  $16, Y8, Y8
	VPSLLD  $16, Y10, Y10
	VMOVDQU 0(DI)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y0
	VFMADD231PS Y13, Y11, Y4
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y12, Y10, Y4
	VMOVDQU 0(R13)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y1
	VFMADD231PS Y13, Y11, Y5
	VFMADD231PS Y12, Y8, Y1
	VFMADD231PS Y12, Y10, Y5
	VMOVDQU 0(R14)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y2
	VFMADD231PS Y13, Y11, Y6
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y10, Y6
	VMOVDQU 0(CX)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y3
	VFMADD231PS Y13, Y11, Y7
	VFMADD231PS Y12, Y8, Y3
	VFMADD231PS Y12, Y10, Y7
	ADDQ $64, AX
	JMP  bloop0

bstore0:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y4, 0(DX)(R10*1)
	VMOVUPS Y1, 64(DX)
	VMOVUPS Y5, 64(DX)(R10*1)
	VMOVUPS Y2, 128(DX)
	VMOVUPS Y6, 128(DX)(R10*1)
	VMOVUPS Y3, 192(DX)
	VMOVUPS Y7, 192(DX)(R10*1)
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	XORQ  AX, AX

bloop1:
	CMPQ AX, R9
	JGE  bstore1
	VMOVDQU 32(SI)(AX*1), Y8
	VMOVDQU 32(BX)(AX*1), Y10
	VPAND   Y15, Y8, Y9
	VPAND   Y15, Y10, Y11
	VPSLLD  $16, Y8, Y8
	VPSLLD  $16, Y10, Y10
	VMOVDQU 32(DI)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y0
	VFMADD231PS Y13, Y11, Y4
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y12, Y10, Y4
	VMOVDQU 32(R13)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y1
	VFMADD231PS Y13, Y11, Y5
	VFMADD231PS Y12, Y8, Y1
	VFMADD231PS Y12, Y10, Y5
	VMOVDQU 32(R14)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y2
	VFMADD231PS Y13, Y11, Y6
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y10, Y6
	VMOVDQU 32(CX)(AX*1), Y12
	VPAND   Y15, Y12, Y13
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y13, Y9, Y3
	VFMADD231PS Y13, Y11, Y7
	VFMADD231PS Y12, Y8, Y3
	VFMADD231PS Y12, Y10, Y7
	ADDQ $64, AX
	JMP  bloop1

bstore1:
	VMOVUPS Y0, 32(DX)
	VMOVUPS Y4, 32(DX)(R10*1)
	VMOVUPS Y1, 96(DX)
	VMOVUPS Y5, 96(DX)(R10*1)
	VMOVUPS Y2, 160(DX)
	VMOVUPS Y6, 160(DX)(R10*1)
	VMOVUPS Y3, 224(DX)
	VMOVUPS Y7, 224(DX)(R10*1)
	ADDQ $256, DX
	LEAQ (DI)(R8*4), DI
	SUBQ $4, R11
	JMP  bgrp

bdone:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET
