// Hand-written: one short masked loop, nothing to generate.

//go:build amd64 && !purego

#include "textflag.h"

// func addAVX512(dst, x *float32, n int)
// dst[i] += x[i] for i < n: one IEEE addition per element, as the scalar
// loop; the tail is masked.
TEXT ·addAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, BX
	ANDQ $-32, BX
	XORQ AX, AX

ad32:
	CMPQ    AX, BX
	JGE     ad16
	VMOVUPS (DI)(AX*4), Z0
	VMOVUPS 64(DI)(AX*4), Z1
	VADDPS  (SI)(AX*4), Z0, Z0
	VADDPS  64(SI)(AX*4), Z1, Z1
	VMOVUPS Z0, (DI)(AX*4)
	VMOVUPS Z1, 64(DI)(AX*4)
	ADDQ    $32, AX
	JMP     ad32

ad16:
	MOVQ    CX, BX
	ANDQ    $-16, BX
	CMPQ    AX, BX
	JGE     adtail
	VMOVUPS (DI)(AX*4), Z0
	VADDPS  (SI)(AX*4), Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX

adtail:
	ANDQ      $15, CX
	JZ        addone
	MOVL      $1, DX
	SHLL      CX, DX
	DECL      DX
	KMOVW     DX, K1
	VMOVUPS.Z (DI)(AX*4), K1, Z0
	VMOVUPS.Z (SI)(AX*4), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(AX*4)

addone:
	VZEROUPPER
	RET
