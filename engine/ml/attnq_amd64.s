// Hand-written: two short kernels; their grouped variants are generated (attnqg_amd64.s).

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// Attention over a block-quantized KV cache (attnq.go), AVX-512. Each
// kernel expands a block in registers exactly as the dequantizers do
// (float32(q) * d, one rounding) and then runs the operations of
// attnScoresAVX512 / attnAccumAVX512 (silu_attn_amd64.s) on it in the same
// order, so the results equal those kernels over dequantized rows bit for
// bit. Rows are nb whole blocks: d = 32*nb, no tail.

// Q8_0 block at R12: Z5 = d in every lane, Z6/Z7 = values 0..15 / 16..31.
#define Q8_EXPAND \
	VPBROADCASTW (R12), Y5      \
	VCVTPH2PS    Y5, Z5         \
	VPMOVSXBD    2(R12), Z6     \
	VPMOVSXBD    18(R12), Z7    \
	VCVTDQ2PS    Z6, Z6         \
	VCVTDQ2PS    Z7, Z7         \
	VMULPS       Z5, Z6, Z6     \
	VMULPS       Z5, Z7, Z7

// Q4_0 block at R12 (Z28 = 15, Z29 = 8 in every dword): low nibbles are
// values 0..15, high nibbles 16..31, each q - 8.
#define Q4_EXPAND \
	VPBROADCASTW (R12), Y5      \
	VCVTPH2PS    Y5, Z5         \
	VPMOVZXBD    2(R12), Z6     \
	VPSRLD       $4, Z6, Z7     \
	VPANDD       Z28, Z6, Z6    \
	VPSUBD       Z29, Z6, Z6    \
	VPSUBD       Z29, Z7, Z7    \
	VCVTDQ2PS    Z6, Z6         \
	VCVTDQ2PS    Z7, Z7         \
	VMULPS       Z5, Z6, Z6     \
	VMULPS       Z5, Z7, Z7

#define Q4_CONSTS \
	MOVL         $15, AX \
	VPBROADCASTD AX, Z28 \
	MOVL         $8, AX  \
	VPBROADCASTD AX, Z29

// dst[t] = dot(q[:32*nb], row t) * scale, row t the nb blocks at
// kv+offs[t]. (Written out for each type: the assembler has no token
// pasting for labels.) The accumulation kernels are generated, in
// attnqg_amd64.s.

// func attnScoresQ8AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
TEXT ·attnScoresQ8AVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         nb+40(FP), R9
	VBROADCASTSS scale+48(FP), Z31
	XORQ         DX, DX
sq8_t:
	CMPQ       DX, R11
	JGE        sq8_done
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        sq8_nopf
	MOVQ       (R10)(R12*8), R12
	ADDQ       R8, R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)
sq8_nopf:
	MOVQ   (R10)(DX*8), R12
	ADDQ   R8, R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ   SI, R13
	MOVQ   R9, CX
sq8_b:
	Q8_EXPAND
	VMOVUPS     (R13), Z2
	VMOVUPS     64(R13), Z3
	VFMADD231PS Z6, Z2, Z0
	VFMADD231PS Z7, Z3, Z1
	ADDQ        $128, R13
	ADDQ        $34, R12
	DECQ        CX
	JNZ         sq8_b
	VADDPS Z1, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMULSS X31, X0, X0
	VMOVSS X0, (DI)(DX*4)
	INCQ   DX
	JMP    sq8_t
sq8_done:
	VZEROUPPER
	RET

// func attnScoresQ4AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
TEXT ·attnScoresQ4AVX512(SB), NOSPLIT, $0-52
	Q4_CONSTS
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         nb+40(FP), R9
	VBROADCASTSS scale+48(FP), Z31
	XORQ         DX, DX
sq4_t:
	CMPQ       DX, R11
	JGE        sq4_done
	LEAQ       2(DX), R12
	CMPQ       R12, R11
	JGE        sq4_nopf
	MOVQ       (R10)(R12*8), R12
	ADDQ       R8, R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)
sq4_nopf:
	MOVQ   (R10)(DX*8), R12
	ADDQ   R8, R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ   SI, R13
	MOVQ   R9, CX
sq4_b:
	Q4_EXPAND
	VMOVUPS     (R13), Z2
	VMOVUPS     64(R13), Z3
	VFMADD231PS Z6, Z2, Z0
	VFMADD231PS Z7, Z3, Z1
	ADDQ        $128, R13
	ADDQ        $18, R12
	DECQ        CX
	JNZ         sq4_b
	VADDPS Z1, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMULSS X31, X0, X0
	VMOVSS X0, (DI)(DX*4)
	INCQ   DX
	JMP    sq4_t
sq4_done:
	VZEROUPPER
	RET
