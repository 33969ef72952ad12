// Hand-written: two grouped-query kernels (four heads per key or value row), each spelt out once.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// func attnScoresF16G4AVX512(dst, q *float32, kv *uint16, offs *int, n, d, ds int, scale float32)
// Per position, the key row is converted once (32 values per step) and
// each of the four heads runs attnScoresF16AVX512's two FMA chains (even
// and odd 16-lane chunks) on it; the chains are summed, reduced by REDUCE4
// (per lane REDUCE1) and scaled as there. d is a multiple of 32; q's heads
// lie d floats apart, dst's ds floats apart.
TEXT ·attnScoresF16G4AVX512(SB), NOSPLIT, $0-60
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         d+40(FP), CX
	MOVQ         ds+48(FP), R9
	VBROADCASTSS scale+56(FP), Z31
	SHLQ         $2, R9
	MOVQ         CX, BX
	SHLQ         $2, BX
	XORQ         DX, DX

gs_t:
	CMPQ       DX, R11
	JGE        gs_done
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        gs_nopf
	MOVQ       (R10)(R12*8), R12
	LEAQ       (R8)(R12*2), R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)

gs_nopf:
	MOVQ   (R10)(DX*8), R12
	LEAQ   (R8)(R12*2), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ   AX, AX

gs_2:
	CMPQ        AX, CX
	JGE         gs_red
	VCVTPH2PS   (R12)(AX*2), Z10
	VCVTPH2PS   32(R12)(AX*2), Z11
	LEAQ        (SI)(AX*4), R13
	VMOVUPS     (R13), Z8
	VMOVUPS     64(R13), Z9
	VFMADD231PS Z10, Z8, Z0
	VFMADD231PS Z11, Z9, Z1
	ADDQ        BX, R13
	VMOVUPS     (R13), Z12
	VMOVUPS     64(R13), Z13
	VFMADD231PS Z10, Z12, Z2
	VFMADD231PS Z11, Z13, Z3
	ADDQ        BX, R13
	VMOVUPS     (R13), Z14
	VMOVUPS     64(R13), Z15
	VFMADD231PS Z10, Z14, Z4
	VFMADD231PS Z11, Z15, Z5
	ADDQ        BX, R13
	VMOVUPS     (R13), Z8
	VMOVUPS     64(R13), Z9
	VFMADD231PS Z10, Z8, Z6
	VFMADD231PS Z11, Z9, Z7
	ADDQ        $32, AX
	JMP         gs_2

gs_red:
	VADDPS     Z1, Z0, Z0
	VADDPS     Z3, Z2, Z2
	VADDPS     Z5, Z4, Z4
	VADDPS     Z7, Z6, Z6
	REDUCE4(Z0, Z2, Z4, Z6, Y0, Y2, Y4, Y6, X0, X2, X4, X6)
	VMULPS     X31, X0, X0
	LEAQ       (DI)(DX*4), R13
	VMOVSS     X0, (R13)
	ADDQ       R9, R13
	VEXTRACTPS $1, X0, (R13)
	ADDQ       R9, R13
	VEXTRACTPS $2, X0, (R13)
	ADDQ       R9, R13
	VEXTRACTPS $3, X0, (R13)
	INCQ       DX
	JMP        gs_t

gs_done:
	VZEROUPPER
	RET

// func attnAccumF16G4AVX512(out, w *float32, kv *uint16, offs *int, n, d, ws int)
// attnAccumF16AVX512's 64-element step for four heads: per 64 elements,
// the four heads' outputs stay in Z0-Z15 while every position's value row
// is converted once and added with each head's weight, one FMA chain per
// element over t in order. d is a multiple of 64; out's heads lie d floats
// apart, w's ws floats apart.
TEXT ·attnAccumF16G4AVX512(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ kv+16(FP), R8
	MOVQ offs+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ d+40(FP), CX
	MOVQ ws+48(FP), R9
	SHLQ $2, R9
	MOVQ CX, BX
	SHLQ $2, BX
	XORQ AX, AX

ga_4:
	CMPQ    AX, CX
	JGE     ga_done
	LEAQ    (DI)(AX*4), R13
	VMOVUPS (R13), Z0
	VMOVUPS 64(R13), Z1
	VMOVUPS 128(R13), Z2
	VMOVUPS 192(R13), Z3
	ADDQ    BX, R13
	VMOVUPS (R13), Z4
	VMOVUPS 64(R13), Z5
	VMOVUPS 128(R13), Z6
	VMOVUPS 192(R13), Z7
	ADDQ    BX, R13
	VMOVUPS (R13), Z8
	VMOVUPS 64(R13), Z9
	VMOVUPS 128(R13), Z10
	VMOVUPS 192(R13), Z11
	ADDQ    BX, R13
	VMOVUPS (R13), Z12
	VMOVUPS 64(R13), Z13
	VMOVUPS 128(R13), Z14
	VMOVUPS 192(R13), Z15
	XORQ    DX, DX

ga_t:
	CMPQ       DX, R11
	JGE        ga_st
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        ga_nopf
	MOVQ       (R10)(R12*8), R12
	LEAQ       (R8)(R12*2), R12
	PREFETCHT0 (R12)(AX*2)
	PREFETCHT0 64(R12)(AX*2)

ga_nopf:
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*2), R12
	VCVTPH2PS    (R12)(AX*2), Z16
	VCVTPH2PS    32(R12)(AX*2), Z17
	VCVTPH2PS    64(R12)(AX*2), Z18
	VCVTPH2PS    96(R12)(AX*2), Z19
	LEAQ         (SI)(DX*4), R14
	VBROADCASTSS (R14), Z20
	ADDQ         R9, R14
	VBROADCASTSS (R14), Z21
	ADDQ         R9, R14
	VBROADCASTSS (R14), Z22
	ADDQ         R9, R14
	VBROADCASTSS (R14), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	INCQ         DX
	JMP          ga_t

ga_st:
	LEAQ    (DI)(AX*4), R13
	VMOVUPS Z0, (R13)
	VMOVUPS Z1, 64(R13)
	VMOVUPS Z2, 128(R13)
	VMOVUPS Z3, 192(R13)
	ADDQ    BX, R13
	VMOVUPS Z4, (R13)
	VMOVUPS Z5, 64(R13)
	VMOVUPS Z6, 128(R13)
	VMOVUPS Z7, 192(R13)
	ADDQ    BX, R13
	VMOVUPS Z8, (R13)
	VMOVUPS Z9, 64(R13)
	VMOVUPS Z10, 128(R13)
	VMOVUPS Z11, 192(R13)
	ADDQ    BX, R13
	VMOVUPS Z12, (R13)
	VMOVUPS Z13, 64(R13)
	VMOVUPS Z14, 128(R13)
	VMOVUPS Z15, 192(R13)
	ADDQ    $64, AX
	JMP     ga_4

ga_done:
	VZEROUPPER
	RET
