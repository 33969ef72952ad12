//go:build amd64 && !purego

#include "textflag.h"

// func cvtF16RowsAVX512(dst *float32, kv *uint16, offs *int, m int, d16 int)
//
// Converts m rows of 16*d16 f16 values, row j at kv + offs[j] (in
// elements), to consecutive float32 rows at dst. One call gathers a whole
// tile of attention positions (a call per 64-value row cost more than the
// conversion).
TEXT ·cvtF16RowsAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ kv+8(FP), SI
	MOVQ offs+16(FP), BX
	MOVQ m+24(FP), CX
	MOVQ d16+32(FP), DX

rowLoop:
	MOVQ (BX), AX
	LEAQ (SI)(AX*2), AX
	MOVQ DX, R8

vecLoop:
	VCVTPH2PS (AX), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, AX
	ADDQ      $64, DI
	DECQ      R8
	JNZ       vecLoop

	ADDQ $8, BX
	DECQ CX
	JNZ  rowLoop
	VZEROUPPER
	RET
