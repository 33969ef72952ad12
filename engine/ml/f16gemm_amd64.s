//go:build amd64 && !purego

#include "textflag.h"

// Horizontal reduction of four zmm accumulators (registers 0..15) to one
// xmm [sum(a), sum(b), sum(c), sum(d)] left in xa, exactly as
// kernels_amd64.s's REDUCE4. Clobbers Y16/X16 and b,c,d.
#define REDUCE4(za, zb, zc, zd, ya, yb, yc, yd, xa, xb, xc, xd) \
	VEXTRACTF64X4 $1, za, Y16 \
	VADDPS        Y16, ya, ya \
	VEXTRACTF64X4 $1, zb, Y16 \
	VADDPS        Y16, yb, yb \
	VEXTRACTF64X4 $1, zc, Y16 \
	VADDPS        Y16, yc, yc \
	VEXTRACTF64X4 $1, zd, Y16 \
	VADDPS        Y16, yd, yd \
	VEXTRACTF32X4 $1, ya, X16 \
	VADDPS        X16, xa, xa \
	VEXTRACTF32X4 $1, yb, X16 \
	VADDPS        X16, xb, xb \
	VEXTRACTF32X4 $1, yc, X16 \
	VADDPS        X16, xc, xc \
	VEXTRACTF32X4 $1, yd, X16 \
	VADDPS        X16, xd, xd \
	VHADDPS       xb, xa, xa  \
	VHADDPS       xd, xc, xc  \
	VHADDPS       xc, xa, xa

// Build K1 = mask of the low (CX & 15) lanes. Clobbers CX, BX.
#define TAILMASK \
	ANDQ  $15, CX \
	MOVL  $1, BX  \
	SHLL  CX, BX  \
	DECL  BX      \
	KMOVW BX, K1

// func gemmF16x4(x *float32, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int, pf *byte)
// gemmF32x4 with f16 weight rows (ws in bytes) converted as they are
// loaded: the conversion is exact, so every output is gemmF32x4's FMA
// chain, masked tail and REDUCE4 on the decoded rows, bit for bit, without
// a decoded f32 copy of the tile (half the cache footprint, no decode
// pass).
TEXT ·gemmF16x4(SB), NOSPLIT, $0-72
	MOVQ k+32(FP), CX
	MOVQ CX, BX
	SHRQ $4, BX
	SHLQ $5, BX
	MOVQ BX, R14          // R14 = f16 bytes of whole 16-lane steps; the x offset is twice it
	TAILMASK
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), CX
	SHLQ $2, CX
	LEAQ (SI)(CX*1), R8
	LEAQ (SI)(CX*2), R9
	LEAQ (R8)(CX*2), R10
	MOVQ w+16(FP), DI
	MOVQ dst+40(FP), DX
	MOVQ nw+56(FP), BX
	MOVQ pf+64(FP), R15

ghrow:
	CMPQ BX, $4
	JLT  ghdone
	MOVQ ws+24(FP), CX
	LEAQ (DI)(CX*1), R11
	LEAQ (DI)(CX*2), R12
	LEAQ (R11)(CX*2), R13
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	XORQ AX, AX

ghloop:
	CMPQ AX, R14
	JGE  ghtail
	PREFETCHT0  (R15)
	PREFETCHT0  64(R15)
	ADDQ        $128, R15
	VMOVUPS     (SI)(AX*2), Z16
	VMOVUPS     (R8)(AX*2), Z17
	VMOVUPS     (R9)(AX*2), Z18
	VMOVUPS     (R10)(AX*2), Z19
	VCVTPH2PS   (DI)(AX*1), Z20
	VCVTPH2PS   (R11)(AX*1), Z21
	VCVTPH2PS   (R12)(AX*1), Z22
	VCVTPH2PS   (R13)(AX*1), Z23
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z1
	VFMADD231PS Z22, Z16, Z2
	VFMADD231PS Z23, Z16, Z3
	VFMADD231PS Z20, Z17, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z22, Z17, Z6
	VFMADD231PS Z23, Z17, Z7
	VFMADD231PS Z20, Z18, Z8
	VFMADD231PS Z21, Z18, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z23, Z18, Z11
	VFMADD231PS Z20, Z19, Z12
	VFMADD231PS Z21, Z19, Z13
	VFMADD231PS Z22, Z19, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ        $32, AX
	JMP         ghloop

ghtail:
	KORTESTW K1, K1
	JZ       ghreduce
	VMOVUPS.Z   (SI)(AX*2), K1, Z16
	VMOVUPS.Z   (R8)(AX*2), K1, Z17
	VMOVUPS.Z   (R9)(AX*2), K1, Z18
	VMOVUPS.Z   (R10)(AX*2), K1, Z19
	VMOVDQU16.Z (DI)(AX*1), K1, Y20
	VCVTPH2PS   Y20, Z20
	VMOVDQU16.Z (R11)(AX*1), K1, Y21
	VCVTPH2PS   Y21, Z21
	VMOVDQU16.Z (R12)(AX*1), K1, Y22
	VCVTPH2PS   Y22, Z22
	VMOVDQU16.Z (R13)(AX*1), K1, Y23
	VCVTPH2PS   Y23, Z23
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z1
	VFMADD231PS Z22, Z16, Z2
	VFMADD231PS Z23, Z16, Z3
	VFMADD231PS Z20, Z17, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z22, Z17, Z6
	VFMADD231PS Z23, Z17, Z7
	VFMADD231PS Z20, Z18, Z8
	VFMADD231PS Z21, Z18, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z23, Z18, Z11
	VFMADD231PS Z20, Z19, Z12
	VFMADD231PS Z21, Z19, Z13
	VFMADD231PS Z22, Z19, Z14
	VFMADD231PS Z23, Z19, Z15

ghreduce:
	MOVQ ds+48(FP), CX
	SHLQ $2, CX
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	VMOVUPS X0, (DX)
	REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7)
	VMOVUPS X4, (DX)(CX*1)
	REDUCE4(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, X8, X9, X10, X11)
	VMOVUPS X8, (DX)(CX*2)
	LEAQ    (DX)(CX*2), AX
	REDUCE4(Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15, X12, X13, X14, X15)
	VMOVUPS X12, (AX)(CX*1)
	ADDQ    $16, DX
	MOVQ    ws+24(FP), CX
	SHLQ    $2, CX
	ADDQ    CX, DI
	SUBQ    $4, BX
	JMP     ghrow

ghdone:
	VZEROUPPER
	RET
