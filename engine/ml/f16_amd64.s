//go:build amd64 && !purego

#include "textflag.h"

// Build K1 = mask of the low (CX & 15) lanes. Clobbers CX, BX.
#define F16_TAILMASK \
	ANDQ  $15, CX \
	MOVL  $1, BX  \
	SHLL  CX, BX  \
	DECL  BX      \
	KMOVW BX, K1

// func cvtF32F16AVX512(dst *uint16, src *float32, n int)
// dst[i] = f16(src[i]) rounded to nearest even (VCVTPS2PH imm 0).
TEXT ·cvtF32F16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	F16_TAILMASK

ch1:
	TESTQ     R9, R9
	JZ        chtail
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1
	VMOVDQU   Y1, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      R9
	JMP       ch1

chtail:
	KORTESTW    K1, K1
	JZ          chdone
	VMOVUPS.Z   (SI), K1, Z0
	VCVTPS2PH   $0, Z0, Y1
	VMOVDQU16   Y1, K1, (DI)

chdone:
	VZEROUPPER
	RET

// func cvtF16F32AVX2(dst *float32, src *uint16, n8 int)
// n8 values, a multiple of 8, with F16C.
TEXT ·cvtF16F32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), CX
	SHRQ $3, CX

hf1:
	TESTQ     CX, CX
	JZ        hfdone
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JMP       hf1

hfdone:
	VZEROUPPER
	RET

// func cvtF32F16AVX2(dst *uint16, src *float32, n8 int)
TEXT ·cvtF32F16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), CX
	SHRQ $3, CX

fh1:
	TESTQ     CX, CX
	JZ        fhdone
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JMP       fh1

fhdone:
	VZEROUPPER
	RET
