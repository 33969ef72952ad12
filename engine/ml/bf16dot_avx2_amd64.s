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
