// Hand-written: three distinct AVX2 kernels; the matvecs are floatmm_amd64.s.

//go:build amd64 && !purego

#include "textflag.h"

// AVX2+FMA+F16C kernels for machines without AVX-512. Lengths are whole
// 8-lane steps; the Go wrappers add any tail.

// Sum the 8 lanes of y into the low lane of x. Clobbers X15.
#define HSUM8(y, x) \
	VEXTRACTF128 $1, y, X15 \
	VADDPS       X15, x, x  \
	VHADDPS      x, x, x    \
	VHADDPS      x, x, x

// func dotAVX2(a, b *float32, n8 int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n8+16(FP), R9
	SHLQ $2, R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	MOVQ R9, BX
	ANDQ $-128, BX

d2x4:
	CMPQ AX, BX
	JGE  d2x1
	VMOVUPS     (SI)(AX*1), Y4
	VMOVUPS     32(SI)(AX*1), Y5
	VMOVUPS     64(SI)(AX*1), Y6
	VMOVUPS     96(SI)(AX*1), Y7
	VFMADD231PS (DI)(AX*1), Y4, Y0
	VFMADD231PS 32(DI)(AX*1), Y5, Y1
	VFMADD231PS 64(DI)(AX*1), Y6, Y2
	VFMADD231PS 96(DI)(AX*1), Y7, Y3
	ADDQ        $128, AX
	JMP         d2x4

d2x1:
	CMPQ AX, R9
	JGE  d2red
	VMOVUPS     (SI)(AX*1), Y4
	VFMADD231PS (DI)(AX*1), Y4, Y0
	ADDQ        $32, AX
	JMP         d2x1

d2red:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8(Y0, X0)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyAVX2(dst *float32, a float32, x *float32, n8 int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y8
	MOVQ         x+16(FP), SI
	MOVQ         n8+24(FP), R9
	SHLQ         $2, R9
	XORQ         AX, AX

a2loop:
	CMPQ        AX, R9
	JGE         a2done
	VMOVUPS     (DI)(AX*1), Y0
	VFMADD231PS (SI)(AX*1), Y8, Y0
	VMOVUPS     Y0, (DI)(AX*1)
	ADDQ        $32, AX
	JMP         a2loop

a2done:
	VZEROUPPER
	RET

// func gemmF32x4AVX2(x *float32, xs int, w *float32, ws int, k8 int, dst *float32, ds int, nw int)
// dst[i*ds+r] = dot(x[i*xs:][:k8], w[r*ws:][:k8]) for i < 4, r < nw (even).
// Two weight rows by four activation rows per step: 8 accumulators.
TEXT ·gemmF32x4AVX2(SB), NOSPLIT, $0-64
	MOVQ k8+32(FP), R14
	SHLQ $2, R14
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), CX
	SHLQ $2, CX
	LEAQ (SI)(CX*1), R8
	LEAQ (SI)(CX*2), R9
	LEAQ (R8)(CX*2), R10
	MOVQ w+16(FP), DI
	MOVQ ws+24(FP), R12
	SHLQ $2, R12
	MOVQ dst+40(FP), DX
	MOVQ ds+48(FP), CX
	SHLQ $2, CX
	MOVQ nw+56(FP), BX

m2row:
	CMPQ BX, $2
	JLT  m2done
	LEAQ (DI)(R12*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

m2loop:
	CMPQ AX, R14
	JGE  m2red
	VMOVUPS     (DI)(AX*1), Y8
	VMOVUPS     (R11)(AX*1), Y9
	VMOVUPS     (SI)(AX*1), Y10
	VMOVUPS     (R8)(AX*1), Y11
	VMOVUPS     (R9)(AX*1), Y12
	VMOVUPS     (R10)(AX*1), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ        $32, AX
	JMP         m2loop

m2red:
	// Pairs (Y0,Y1) (Y2,Y3) (Y4,Y5) (Y6,Y7) -> [x_i.w0, x_i.w1] per row i.
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y5, Y4, Y4
	VHADDPS      Y7, Y6, Y6
	VHADDPS      Y2, Y0, Y0 // lanes: [r0w0 r0w1 r1w0 r1w1 | same, other half]
	VHADDPS      Y6, Y4, Y4
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VEXTRACTF128 $1, Y4, X8
	VADDPS       X8, X4, X4
	MOVQ         DX, AX
	VMOVLPS      X0, (AX)
	ADDQ         CX, AX
	VMOVHPS      X0, (AX)
	ADDQ         CX, AX
	VMOVLPS      X4, (AX)
	ADDQ         CX, AX
	VMOVHPS      X4, (AX)
	ADDQ         $8, DX
	LEAQ         (DI)(R12*2), DI
	SUBQ         $2, BX
	JMP          m2row

m2done:
	VZEROUPPER
	RET
