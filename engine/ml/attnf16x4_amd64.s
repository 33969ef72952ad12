// Hand-written: one kernel whose four keys are spelt out once; no copies to generate.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// REDUCE4 (reduce_amd64.h) is, per lane, attnScoresF16AVX512's REDUCE1: the
// 256-bit halves added, then the 128-bit halves, then (x0+x1)+(x2+x3).

// Key pointer of position DX+i: kv + 2*offs[DX+i].
#define KEY(i, r) \
	MOVQ i*8(R10)(DX*8), r \
	LEAQ (R8)(r*2), r

// func attnScoresF16x4AVX512(dst, q *float32, kv *uint16, offs *int, n, d int, scale float32)
// attnScoresF16AVX512 for four positions at a time (n a multiple of 4):
// each score is the same two FMA chains (even and odd 16-lane chunks, the
// masked tail in the odd one), their sum, the same reduction and the
// scale product, so the bits are the one-position kernel's; the four
// independent chains and one q load per chunk for four keys keep the
// FMA units busy where one position's chain waits on its reduction.
TEXT ·attnScoresF16x4AVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         d+40(FP), CX
	VBROADCASTSS scale+48(FP), Z31
	MOVQ         CX, R9
	ANDQ         $-16, R9
	ANDQ         $15, CX
	MOVL         $1, BX
	SHLL         CX, BX
	DECL         BX
	KMOVW        BX, K1
	MOVQ         R9, R13
	ANDQ         $-32, R13
	XORQ         DX, DX

h4_t:
	CMPQ DX, R11
	JGE  h4_done
	// Prefetch the next four keys (two lines each).
	LEAQ 8(DX), R12
	CMPQ R12, R11
	JGT  h4_nopf
	KEY(4, R12)
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	KEY(5, R12)
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	KEY(6, R12)
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	KEY(7, R12)
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)

h4_nopf:
	KEY(0, R12)
	KEY(1, R14)
	KEY(2, R15)
	KEY(3, BX)
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ   AX, AX

h4_2:
	CMPQ        AX, R13
	JGE         h4_1
	VMOVUPS     (SI)(AX*4), Z8
	VMOVUPS     64(SI)(AX*4), Z9
	VCVTPH2PS   (R12)(AX*2), Z10
	VCVTPH2PS   32(R12)(AX*2), Z11
	VFMADD231PS Z10, Z8, Z0
	VFMADD231PS Z11, Z9, Z1
	VCVTPH2PS   (R14)(AX*2), Z12
	VCVTPH2PS   32(R14)(AX*2), Z13
	VFMADD231PS Z12, Z8, Z2
	VFMADD231PS Z13, Z9, Z3
	VCVTPH2PS   (R15)(AX*2), Z14
	VCVTPH2PS   32(R15)(AX*2), Z15
	VFMADD231PS Z14, Z8, Z4
	VFMADD231PS Z15, Z9, Z5
	VCVTPH2PS   (BX)(AX*2), Z10
	VCVTPH2PS   32(BX)(AX*2), Z11
	VFMADD231PS Z10, Z8, Z6
	VFMADD231PS Z11, Z9, Z7
	ADDQ        $32, AX
	JMP         h4_2

h4_1:
	CMPQ        AX, R9
	JGE         h4_tail
	VMOVUPS     (SI)(AX*4), Z8
	VCVTPH2PS   (R12)(AX*2), Z10
	VFMADD231PS Z10, Z8, Z0
	VCVTPH2PS   (R14)(AX*2), Z12
	VFMADD231PS Z12, Z8, Z2
	VCVTPH2PS   (R15)(AX*2), Z14
	VFMADD231PS Z14, Z8, Z4
	VCVTPH2PS   (BX)(AX*2), Z10
	VFMADD231PS Z10, Z8, Z6
	ADDQ        $16, AX

h4_tail:
	KORTESTW    K1, K1
	JZ          h4_red
	VMOVUPS.Z   (SI)(AX*4), K1, Z8
	VMOVDQU16.Z (R12)(AX*2), K1, Y10
	VCVTPH2PS   Y10, Z10
	VFMADD231PS Z10, Z8, Z1
	VMOVDQU16.Z (R14)(AX*2), K1, Y12
	VCVTPH2PS   Y12, Z12
	VFMADD231PS Z12, Z8, Z3
	VMOVDQU16.Z (R15)(AX*2), K1, Y14
	VCVTPH2PS   Y14, Z14
	VFMADD231PS Z14, Z8, Z5
	VMOVDQU16.Z (BX)(AX*2), K1, Y10
	VCVTPH2PS   Y10, Z10
	VFMADD231PS Z10, Z8, Z7

h4_red:
	VADDPS  Z1, Z0, Z0
	VADDPS  Z3, Z2, Z2
	VADDPS  Z5, Z4, Z4
	VADDPS  Z7, Z6, Z6
	REDUCE4(Z0, Z2, Z4, Z6, Y0, Y2, Y4, Y6, X0, X2, X4, X6)
	VMULPS  X31, X0, X0
	VMOVUPS X0, (DI)(DX*4)
	ADDQ    $4, DX
	JMP     h4_t

h4_done:
	VZEROUPPER
	RET
