// Hand-written: seven distinct small kernels; the 4x4 tile products are floatmm_amd64.s.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// func gemvF32(x *float32, w *float32, ws int, k int, dst *float32, nw int)
// dst[r] = dot(x, w[r*ws:]) for r < nw, nw a multiple of 4.
// Batch invariance: each output is one FMA chain over the 16-lane steps of
// k, then the masked tail step, then REDUCE4 -- exactly gemmF32x4's
// arithmetic, so a row's result does not depend on the batch size.
TEXT ·gemvF32(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), R8
	SHLQ $2, R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $6, R9         // R9 = bytes of whole 16-lane steps
	TAILMASK
	MOVQ dst+32(FP), DX
	MOVQ nw+40(FP), R10
	LEAQ (R8)(R8*2), R14 // 3*stride

gvrow:
	CMPQ R10, $4
	JLT  gvdone
	MOVQ DI, R11
	LEAQ (DI)(R8*1), R12
	LEAQ (DI)(R8*2), R13
	ADDQ DI, R14
	LEAQ (DI)(R8*4), R15 // the next four rows, prefetched as we go
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	MOVQ R9, BX
	ANDQ $-128, BX

gvloop2:
	CMPQ AX, BX
	JGE  gvloop1
	LEAQ        (R15)(AX*1), CX
	PREFETCHT0  (CX)
	PREFETCHT0  64(CX)
	PREFETCHT0  (CX)(R8*1)
	PREFETCHT0  64(CX)(R8*1)
	PREFETCHT0  (CX)(R8*2)
	PREFETCHT0  64(CX)(R8*2)
	ADDQ        R8, CX
	PREFETCHT0  (CX)(R8*2)
	PREFETCHT0  64(CX)(R8*2)
	VMOVUPS     (SI)(AX*1), Z8
	VMOVUPS     64(SI)(AX*1), Z9
	VFMADD231PS (R11)(AX*1), Z8, Z0
	VFMADD231PS (R12)(AX*1), Z8, Z1
	VFMADD231PS (R13)(AX*1), Z8, Z2
	VFMADD231PS (R14)(AX*1), Z8, Z3
	VFMADD231PS 64(R11)(AX*1), Z9, Z0
	VFMADD231PS 64(R12)(AX*1), Z9, Z1
	VFMADD231PS 64(R13)(AX*1), Z9, Z2
	VFMADD231PS 64(R14)(AX*1), Z9, Z3
	ADDQ        $128, AX
	JMP         gvloop2

gvloop1:
	CMPQ AX, R9
	JGE  gvtail
	VMOVUPS     (SI)(AX*1), Z8
	VFMADD231PS (R11)(AX*1), Z8, Z0
	VFMADD231PS (R12)(AX*1), Z8, Z1
	VFMADD231PS (R13)(AX*1), Z8, Z2
	VFMADD231PS (R14)(AX*1), Z8, Z3
	ADDQ        $64, AX

gvtail:
	KORTESTW K1, K1
	JZ       gvreduce
	VMOVUPS.Z   (SI)(AX*1), K1, Z8
	VMOVUPS.Z   (R11)(AX*1), K1, Z9
	VFMADD231PS Z9, Z8, Z0
	VMOVUPS.Z   (R12)(AX*1), K1, Z9
	VFMADD231PS Z9, Z8, Z1
	VMOVUPS.Z   (R13)(AX*1), K1, Z9
	VFMADD231PS Z9, Z8, Z2
	VMOVUPS.Z   (R14)(AX*1), K1, Z9
	VFMADD231PS Z9, Z8, Z3

gvreduce:
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	VMOVUPS X0, (DX)
	ADDQ    $16, DX
	LEAQ    (DI)(R8*4), DI
	LEAQ    (R8)(R8*2), R14
	SUBQ    $4, R10
	JMP     gvrow

gvdone:
	VZEROUPPER
	RET

// gemvF32's loop2 falls through into loop1 only once; loop1 handles at most
// one 16-lane step because BX rounds R9 down to a multiple of 128 bytes.

// func gemvF16(x *float32, w *byte, ws int, k int, dst *float32, nw int)
// dst[r] = dot(x[:k], f16(w[r*ws:])[:k]) for r < nw (a multiple of 4);
// ws is the row stride in bytes. The arithmetic is gemmF32x4's over the
// decoded rows (one FMA chain, masked tail, REDUCE4).
TEXT ·gemvF16(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $5, R9          // R9 = bytes of f16 in whole 16-lane steps
	TAILMASK
	MOVQ dst+32(FP), DX
	MOVQ nw+40(FP), R10
	LEAQ (R8)(R8*2), R14

hvrow:
	CMPQ R10, $4
	JLT  hvdone
	MOVQ DI, R11
	LEAQ (DI)(R8*1), R12
	LEAQ (DI)(R8*2), R13
	ADDQ DI, R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX          // f16 byte offset; the x offset is twice it
	MOVQ SI, BX

hvloop:
	CMPQ AX, R9
	JGE  hvtail
	VMOVUPS     (BX), Z8
	VCVTPH2PS   (R11)(AX*1), Z9
	VCVTPH2PS   (R12)(AX*1), Z10
	VCVTPH2PS   (R13)(AX*1), Z11
	VCVTPH2PS   (R14)(AX*1), Z12
	VFMADD231PS Z9, Z8, Z0
	VFMADD231PS Z10, Z8, Z1
	VFMADD231PS Z11, Z8, Z2
	VFMADD231PS Z12, Z8, Z3
	ADDQ        $32, AX
	ADDQ        $64, BX
	JMP         hvloop

hvtail:
	KORTESTW K1, K1
	JZ       hvreduce
	VMOVUPS.Z    (BX), K1, Z8
	VMOVDQU16.Z  (R11)(AX*1), K1, Y9
	VCVTPH2PS    Y9, Z9
	VFMADD231PS  Z9, Z8, Z0
	VMOVDQU16.Z  (R12)(AX*1), K1, Y9
	VCVTPH2PS    Y9, Z9
	VFMADD231PS  Z9, Z8, Z1
	VMOVDQU16.Z  (R13)(AX*1), K1, Y9
	VCVTPH2PS    Y9, Z9
	VFMADD231PS  Z9, Z8, Z2
	VMOVDQU16.Z  (R14)(AX*1), K1, Y9
	VCVTPH2PS    Y9, Z9
	VFMADD231PS  Z9, Z8, Z3

hvreduce:
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	VMOVUPS X0, (DX)
	ADDQ    $16, DX
	LEAQ    (DI)(R8*4), DI
	LEAQ    (R8)(R8*2), R14
	SUBQ    $4, R10
	JMP     hvrow

hvdone:
	VZEROUPPER
	RET

// func dotAVX512(a, b *float32, n int) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $6, R9
	TAILMASK
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	MOVQ R9, BX
	ANDQ $-256, BX

dt4:
	CMPQ AX, BX
	JGE  dt1
	VMOVUPS     (SI)(AX*1), Z4
	VMOVUPS     64(SI)(AX*1), Z5
	VMOVUPS     128(SI)(AX*1), Z6
	VMOVUPS     192(SI)(AX*1), Z7
	VFMADD231PS (DI)(AX*1), Z4, Z0
	VFMADD231PS 64(DI)(AX*1), Z5, Z1
	VFMADD231PS 128(DI)(AX*1), Z6, Z2
	VFMADD231PS 192(DI)(AX*1), Z7, Z3
	ADDQ        $256, AX
	JMP         dt4

dt1:
	CMPQ AX, R9
	JGE  dttail
	VMOVUPS     (SI)(AX*1), Z4
	VFMADD231PS (DI)(AX*1), Z4, Z0
	ADDQ        $64, AX
	JMP         dt1

dttail:
	KORTESTW K1, K1
	JZ       dtreduce
	VMOVUPS.Z   (SI)(AX*1), K1, Z4
	VMOVUPS.Z   (DI)(AX*1), K1, Z5
	VFMADD231PS Z5, Z4, Z1

dtreduce:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func sumAVX512(p *float32, n int) float32
// The bandwidth probe: the same 4-way unrolled 16-lane loads as dot.
TEXT ·sumAVX512(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $6, R9
	TAILMASK
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	MOVQ R9, BX
	ANDQ $-256, BX

sm4:
	CMPQ   AX, BX
	JGE    sm1
	VADDPS (SI)(AX*1), Z0, Z0
	VADDPS 64(SI)(AX*1), Z1, Z1
	VADDPS 128(SI)(AX*1), Z2, Z2
	VADDPS 192(SI)(AX*1), Z3, Z3
	ADDQ   $256, AX
	JMP    sm4

sm1:
	CMPQ   AX, R9
	JGE    smtail
	VADDPS (SI)(AX*1), Z0, Z0
	ADDQ   $64, AX
	JMP    sm1

smtail:
	KORTESTW K1, K1
	JZ       smreduce
	VMOVUPS.Z (SI)(AX*1), K1, Z4
	VADDPS    Z4, Z1, Z1

smreduce:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func axpyAVX512(dst *float32, a float32, x *float32, n int)
TEXT ·axpyAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Z8
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	MOVQ         CX, R9
	SHRQ         $4, R9
	SHLQ         $6, R9
	TAILMASK
	XORQ         AX, AX

ax1:
	CMPQ        AX, R9
	JGE         axtail
	VMOVUPS     (DI)(AX*1), Z0
	VFMADD231PS (SI)(AX*1), Z8, Z0
	VMOVUPS     Z0, (DI)(AX*1)
	ADDQ        $64, AX
	JMP         ax1

axtail:
	KORTESTW K1, K1
	JZ       axdone
	VMOVUPS.Z   (DI)(AX*1), K1, Z0
	VMOVUPS.Z   (SI)(AX*1), K1, Z1
	VFMADD231PS Z1, Z8, Z0
	VMOVUPS     Z0, K1, (DI)(AX*1)

axdone:
	VZEROUPPER
	RET

// func dequantQ8AVX512(dst *float32, src *byte, nb int)
TEXT ·dequantQ8AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R11
	MOVQ nb+16(FP), BX

dq8:
	TESTQ BX, BX
	JZ    dq8done
	VPBROADCASTW (R11), Y20
	VCVTPH2PS    Y20, Z20
	VPMOVSXBD    2(R11), Z21
	VPMOVSXBD    18(R11), Z22
	VCVTDQ2PS    Z21, Z21
	VCVTDQ2PS    Z22, Z22
	VMULPS       Z20, Z21, Z21
	VMULPS       Z20, Z22, Z22
	VMOVUPS      Z21, (DI)
	VMOVUPS      Z22, 64(DI)
	ADDQ         $34, R11
	ADDQ         $128, DI
	DECQ         BX
	JMP          dq8

dq8done:
	VZEROUPPER
	RET

// func dequantF16AVX512(dst *float32, src *byte, n int)
TEXT ·dequantF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	TAILMASK
	XORQ AX, AX

dh1:
	TESTQ R9, R9
	JZ    dhtail
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      R9
	JMP       dh1

dhtail:
	KORTESTW   K1, K1
	JZ         dhdone
	VMOVDQU16.Z (SI), K1, Y1
	VCVTPH2PS  Y1, Z0
	VMOVUPS    Z0, K1, (DI)

dhdone:
	VZEROUPPER
	RET
