package main

// Verbatim assembly text of the Q8_0 kernels (the parts that are not unrolled).

const headerText = `//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI and AVX2 kernels of the integer Q8_0 product (see q8.go for
// the arithmetic every kernel reproduces exactly). The tile kernels are
// unrolled per activation count (8, 4, 1) and otherwise identical.

DATA q8absmask<>+0(SB)/4, $0x7fffffff
GLOBL q8absmask<>(SB), RODATA|NOPTR, $4
DATA q8c127<>+0(SB)/4, $0x42fe0000
GLOBL q8c127<>(SB), RODATA|NOPTR, $4
DATA q8one<>+0(SB)/4, $0x3f800000
GLOBL q8one<>(SB), RODATA|NOPTR, $4
DATA q8bias<>+0(SB)/4, $0x80808080
GLOBL q8bias<>(SB), RODATA|NOPTR, $4
`

const iotaEnd = `GLOBL q8iota<>(SB), RODATA|NOPTR, $64
`

const quantPackText = `// func quantActQ8AVX512(dst *byte, x *float32, nb int)
// Each block of 32 floats becomes {f32 d, int32 -128*sum(q), 32 int8 q}:
// d = max|x|/127, q = roundeven(x * (1/d)) (0 when d is 0).
TEXT ·quantActQ8AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         nb+16(FP), BX
	VPBROADCASTD q8absmask<>(SB), Z31
	VMOVSS       q8c127<>(SB), X30
	VMOVSS       q8one<>(SB), X29

qaloop:
	TESTQ         BX, BX
	JZ            qadone
	VMOVUPS       (SI), Z0
	VMOVUPS       64(SI), Z1
	VPANDD        Z31, Z0, Z2
	VPANDD        Z31, Z1, Z3
	VMAXPS        Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS        Y3, Y2, Y2
	VEXTRACTF32X4 $1, Y2, X3
	VMAXPS        X3, X2, X2
	VPERMILPS     $0x4e, X2, X3
	VMAXPS        X3, X2, X2
	VPERMILPS     $0xb1, X2, X3
	VMAXPS        X3, X2, X2
	VDIVSS        X30, X2, X4 // d = amax / 127
	VXORPS        X5, X5, X5
	VUCOMISS      X5, X4
	JEQ           qazero
	VDIVSS        X4, X29, X5 // id = 1 / d

qazero:
	VBROADCASTSS  X5, Z5
	VMULPS        Z5, Z0, Z0
	VMULPS        Z5, Z1, Z1
	VCVTPS2DQ     Z0, Z0
	VCVTPS2DQ     Z1, Z1
	VPMOVSDB      Z0, X6
	VPMOVSDB      Z1, X7
	VMOVDQU       X6, 8(DI)
	VMOVDQU       X7, 24(DI)
	VPMOVSXBD     X6, Z0
	VPMOVSXBD     X7, Z1
	VPADDD        Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD        Y1, Y0, Y0
	VEXTRACTI32X4 $1, Y0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPADDD        X1, X0, X0
	VMOVD         X0, AX
	SHLL          $7, AX
	NEGL          AX
	MOVL          AX, 4(DI)
	VMOVSS        X4, (DI)
	ADDQ          $128, SI
	ADDQ          $40, DI
	DECQ          BX
	JMP           qaloop

qadone:
	VZEROUPPER
	RET

// 4x4 transpose of dwords within each 128-bit lane of a0..a3 (t0..t3 scratch).
#define TR4(a0, a1, a2, a3, t0, t1, t2, t3) \
	VPUNPCKLDQ  a1, a0, t0 \
	VPUNPCKHDQ  a1, a0, t1 \
	VPUNPCKLDQ  a3, a2, t2 \
	VPUNPCKHDQ  a3, a2, t3 \
	VPUNPCKLQDQ t2, t0, a0 \
	VPUNPCKHQDQ t2, t0, a1 \
	VPUNPCKLQDQ t3, t1, a2 \
	VPUNPCKHQDQ t3, t1, a3

// func packQ8Tile(dst *byte, w *byte, rb int, nb int, pfd int)
// Packs 16 rows (stride rb bytes) of nb Q8_0 blocks: per block, vector j
// (j < 8) holds bytes 4j..4j+3 of the block of rows 0..15, each byte
// xor 0x80 (w+128, unsigned); then the 16 rows' scales as f32. It also
// prefetches the same blocks pfd bytes further on (a later tile), so DRAM
// reads stay in flight while the tiles before it are computed.
TEXT ·packQ8Tile(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         w+8(FP), SI
	MOVQ         rb+16(FP), CX
	MOVQ         nb+24(FP), BX
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+32(FP), AX
	LEAQ         (SI)(AX*1), R11
	LEAQ         (R8)(AX*1), R12
	LEAQ         (R9)(AX*1), R13
	LEAQ         (R10)(AX*1), R14
	VPBROADCASTD CX, Z28
	VPMULLD      q8iota<>(SB), Z28, Z28
	VPBROADCASTD q8bias<>(SB), Z27

pkloop:
	TESTQ BX, BX
	JZ    pkdone
	KXNORW K0, K0, K1
	VPGATHERDD (SI)(Z28*1), K1, Z26
	PREFETCHT0 (R11)
	PREFETCHT0 (R11)(CX*1)
	PREFETCHT0 (R11)(CX*2)
	PREFETCHT0 (R11)(DX*1)
	PREFETCHT0 (R12)
	PREFETCHT0 (R12)(CX*1)
	PREFETCHT0 (R12)(CX*2)
	PREFETCHT0 (R12)(DX*1)
	PREFETCHT0 (R13)
	PREFETCHT0 (R13)(CX*1)
	PREFETCHT0 (R13)(CX*2)
	PREFETCHT0 (R13)(DX*1)
	PREFETCHT0 (R14)
	PREFETCHT0 (R14)(CX*1)
	PREFETCHT0 (R14)(CX*2)
	PREFETCHT0 (R14)(DX*1)
`

const tr4Text = `	TR4(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	TR4(Z4, Z5, Z6, Z7, Z20, Z21, Z22, Z23)
`

const packTail = `	VPMOVDW   Z26, Y26
	VCVTPH2PS Y26, Z26
	VMOVUPS   Z26, 512(DI)
	ADDQ      $34, SI
	ADDQ      $34, R8
	ADDQ      $34, R9
	ADDQ      $34, R10
	ADDQ      $34, R11
	ADDQ      $34, R12
	ADDQ      $34, R13
	ADDQ      $34, R14
	ADDQ      $576, DI
	DECQ      BX
	JMP       pkloop

pkdone:
	VZEROUPPER
	RET
`

const storeHead = `	MOVQ  dst+32(FP), AX
	MOVQ  ds+40(FP), CX
	SHLQ  $2, CX
	LEAQ  (CX)(CX*2), DX
	LEAQ  (AX)(CX*4), R8
	MOVWLZX mask+48(FP), BX
	KMOVW BX, K1`

const retText = `	VZEROUPPER
	RET
`
