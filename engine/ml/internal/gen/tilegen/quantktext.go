package main

const quantKIntro = `//go:build amd64 && !purego

#include "textflag.h"

// Q8_K activation quantization with AVX-512, bit for bit
// quantizeActQ8KGeneric (qdot.go): per 256-value block the first value mx
// of largest magnitude (NaNs never win, as there), iscale = -127/mx,
// q = min(127, roundeven(iscale*x)) (VCVTPS2DQ under the default
// round-to-nearest-even; NaN gives 0x80000000 and so byte 0, as Go's
// conversion does), d = 1/iscale and the 16 sums of the stored bytes.
// The sixteen unrolled value steps differ only in their offsets
// (internal/gen/tilegen/quantk.go writes them).

DATA q8kAbs<>+0(SB)/4, $0x7fffffff
GLOBL q8kAbs<>(SB), RODATA|NOPTR, $4
DATA q8k127<>+0(SB)/4, $127
GLOBL q8k127<>(SB), RODATA|NOPTR, $4
DATA q8kM127f<>+0(SB)/4, $0xc2fe0000
GLOBL q8kM127f<>(SB), RODATA|NOPTR, $4
DATA q8kOnef<>+0(SB)/4, $0x3f800000
GLOBL q8kOnef<>(SB), RODATA|NOPTR, $4

// func quantActQ8KAVX512(dst *byte, x *float32, nb int)
TEXT ·quantActQ8KAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ nb+16(FP), BX
	VPBROADCASTD q8kAbs<>(SB), Z31
	VPBROADCASTD q8k127<>(SB), Z30

q8kblk:
	// amax: acc = max(|x|, acc) with acc the second operand, which MAXPS
	// returns when |x| is NaN.
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
`

const quantKFind = `	VMAXPS Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VXORPS X1, X1, X1
	VUCOMISS X1, X0
	JEQ  q8kzero
	VBROADCASTSS X0, Z0

	// mx: the first value whose magnitude is amax.
	MOVQ SI, DX

q8kfind:
	VPANDD (DX), Z31, Z2
	VCMPPS $0, Z0, Z2, K1
	KMOVW K1, AX
	TESTL AX, AX
	JNZ  q8kfound
	ADDQ $64, DX
	JMP  q8kfind

q8kfound:
	TZCNTL AX, AX
	VMOVSS (DX)(AX*4), X2
	VMOVSS q8kM127f<>(SB), X3
	VDIVSS X2, X3, X3
	VMOVSS q8kOnef<>(SB), X4
	VDIVSS X3, X4, X4
	VMOVSS X4, 256(DI)
	VBROADCASTSS X3, Z3
`

const quantKEnd = `
q8knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ BX
	JNZ  q8kblk
	VZEROUPPER
	RET

q8kzero:
	VPXORD Z1, Z1, Z1
	VMOVDQU32 Z1, 0(DI)
	VMOVDQU32 Z1, 64(DI)
	VMOVDQU32 Z1, 128(DI)
	VMOVDQU32 Z1, 192(DI)
	VMOVDQU32 Y1, 256(DI)
	MOVL $0, 288(DI)
	JMP  q8knext
`
