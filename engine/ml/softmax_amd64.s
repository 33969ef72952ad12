// Hand-written: two short masked loops, nothing to generate.

//go:build amd64 && !purego

#include "textflag.h"

// func maxAVX512(x *float32, n int) float32
// The largest of x[:n], n >= 1. Max is exact and order-free for the
// non-NaN values Softmax sees (a +0/-0 tie picks either zero, and x - m is
// the same for both), so this equals the scalar scan's result. The tail is
// masked-merged into a vector pre-filled with x[0].
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS (SI), Z0
	VMOVAPS      Z0, Z1
	MOVQ         CX, BX
	ANDQ         $-32, BX
	XORQ         AX, AX

mx32:
	CMPQ    AX, BX
	JGE     mx16
	VMAXPS  (SI)(AX*4), Z0, Z0
	VMAXPS  64(SI)(AX*4), Z1, Z1
	ADDQ    $32, AX
	JMP     mx32

mx16:
	MOVQ    CX, BX
	ANDQ    $-16, BX
	CMPQ    AX, BX
	JGE     mxtail
	VMAXPS  (SI)(AX*4), Z0, Z0
	ADDQ    $16, AX

mxtail:
	ANDQ    $15, CX
	JZ      mxred
	MOVL    $1, DX
	SHLL    CX, DX
	DECL    DX
	KMOVW   DX, K1
	VBROADCASTSS (SI), Z2
	VMOVUPS (SI)(AX*4), K1, Z2
	VMAXPS  Z2, Z1, Z1

mxred:
	VMAXPS        Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF32X4 $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func divAVX512(x *float32, n int, d float32)
// x[i] /= d for i < n: VDIVPS is IEEE division, the scalar loop's exact
// result per element.
TEXT ·divAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS d+16(FP), Z31
	MOVQ         CX, BX
	ANDQ         $-16, BX
	XORQ         AX, AX

dv16:
	CMPQ    AX, BX
	JGE     dvtail
	VMOVUPS (SI)(AX*4), Z0
	VDIVPS  Z31, Z0, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     dv16

dvtail:
	ANDQ    $15, CX
	JZ      dvdone
	MOVL    $1, DX
	SHLL    CX, DX
	DECL    DX
	KMOVW   DX, K1
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VDIVPS  Z31, Z0, Z0
	VMOVUPS Z0, K1, (SI)(AX*4)

dvdone:
	VZEROUPPER
	RET
