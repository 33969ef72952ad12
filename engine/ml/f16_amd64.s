// Hand-written: five distinct conversion and attention kernels, none unrolled.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// func cvtF32F16AVX512(dst *uint16, src *float32, n int)
// dst[i] = f16(src[i]) rounded to nearest even (VCVTPS2PH imm 0).
TEXT ·cvtF32F16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	TAILMASK

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

// func attnScoresF16AVX512(dst, q *float32, kv *uint16, offs *int, n, d int, scale float32)
// attnScoresAVX512 over f16 keys: the same FMA sequence per score, with each
// 16 keys converted by VCVTPH2PS (exact) as they are loaded. Offsets and
// the loop counter AX are in elements.
TEXT ·attnScoresF16AVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         d+40(FP), CX
	VBROADCASTSS scale+48(FP), Z31
	MOVQ         CX, R9
	ANDQ         $-16, R9
	TAILMASK
	MOVQ         R9, R13
	ANDQ         $-32, R13
	XORQ         DX, DX

hs_t:
	CMPQ       DX, R11
	JGE        hs_done
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        hs_nopf
	MOVQ       (R10)(R12*8), R12
	LEAQ       (R8)(R12*2), R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)

hs_nopf:
	MOVQ   (R10)(DX*8), R12
	LEAQ   (R8)(R12*2), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ   AX, AX

hs_2:
	CMPQ        AX, R13
	JGE         hs_1
	VMOVUPS     (SI)(AX*4), Z2
	VMOVUPS     64(SI)(AX*4), Z3
	VCVTPH2PS   (R12)(AX*2), Z4
	VCVTPH2PS   32(R12)(AX*2), Z5
	VFMADD231PS Z4, Z2, Z0
	VFMADD231PS Z5, Z3, Z1
	ADDQ        $32, AX
	JMP         hs_2

hs_1:
	CMPQ        AX, R9
	JGE         hs_tail
	VMOVUPS     (SI)(AX*4), Z2
	VCVTPH2PS   (R12)(AX*2), Z4
	VFMADD231PS Z4, Z2, Z0
	ADDQ        $16, AX

hs_tail:
	KORTESTW    K1, K1
	JZ          hs_red
	VMOVUPS.Z   (SI)(AX*4), K1, Z2
	VMOVDQU16.Z (R12)(AX*2), K1, Y6
	VCVTPH2PS   Y6, Z3
	VFMADD231PS Z3, Z2, Z1

hs_red:
	VADDPS Z1, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMULSS X31, X0, X0
	VMOVSS X0, (DI)(DX*4)
	INCQ   DX
	JMP    hs_t

hs_done:
	VZEROUPPER
	RET

// func attnAccumF16AVX512(out, w *float32, kv *uint16, offs *int, n, d int)
// attnAccumAVX512 over f16 values: out[:d] += w[t] * kv[offs[t]:][:d] for
// t = 0..n-1 in order, one FMA chain per element over t.
TEXT ·attnAccumF16AVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ kv+16(FP), R8
	MOVQ offs+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ d+40(FP), CX
	MOVQ CX, R9
	ANDQ $-16, R9
	TAILMASK
	MOVQ R9, R13
	ANDQ $-64, R13
	XORQ AX, AX

ha_4:
	CMPQ    AX, R13
	JGE     ha_1
	VMOVUPS (DI)(AX*4), Z0
	VMOVUPS 64(DI)(AX*4), Z1
	VMOVUPS 128(DI)(AX*4), Z2
	VMOVUPS 192(DI)(AX*4), Z3
	XORQ    DX, DX

ha_4t:
	CMPQ       DX, R11
	JGE        ha_4st
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        ha_nopf
	MOVQ       (R10)(R12*8), R12
	LEAQ       (R8)(R12*2), R12
	PREFETCHT0 (R12)(AX*2)
	PREFETCHT0 64(R12)(AX*2)

ha_nopf:
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*2), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VCVTPH2PS    (R12)(AX*2), Z5
	VCVTPH2PS    32(R12)(AX*2), Z6
	VCVTPH2PS    64(R12)(AX*2), Z7
	VCVTPH2PS    96(R12)(AX*2), Z8
	VFMADD231PS  Z5, Z4, Z0
	VFMADD231PS  Z6, Z4, Z1
	VFMADD231PS  Z7, Z4, Z2
	VFMADD231PS  Z8, Z4, Z3
	INCQ         DX
	JMP          ha_4t

ha_4st:
	VMOVUPS Z0, (DI)(AX*4)
	VMOVUPS Z1, 64(DI)(AX*4)
	VMOVUPS Z2, 128(DI)(AX*4)
	VMOVUPS Z3, 192(DI)(AX*4)
	ADDQ    $64, AX
	JMP     ha_4

ha_1:
	CMPQ    AX, R9
	JGE     ha_tail
	VMOVUPS (DI)(AX*4), Z0
	XORQ    DX, DX

ha_1t:
	CMPQ         DX, R11
	JGE          ha_1st
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*2), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VCVTPH2PS    (R12)(AX*2), Z5
	VFMADD231PS  Z5, Z4, Z0
	INCQ         DX
	JMP          ha_1t

ha_1st:
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     ha_1

ha_tail:
	KORTESTW  K1, K1
	JZ        ha_done
	VMOVUPS.Z (DI)(AX*4), K1, Z0
	XORQ      DX, DX

ha_tt:
	CMPQ         DX, R11
	JGE          ha_tst
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*2), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VMOVDQU16.Z  (R12)(AX*2), K1, Y6
	VCVTPH2PS    Y6, Z5
	VFMADD231PS  Z5, Z4, Z0
	INCQ         DX
	JMP          ha_tt

ha_tst:
	VMOVUPS Z0, K1, (DI)(AX*4)

ha_done:
	VZEROUPPER
	RET
