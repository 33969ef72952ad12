package main

// Verbatim parts of q41_amd64.s (see q41.go): prose, DATA, the macros
// of one step each and the expanders, written once.

// q41kIntro is the file's prose, constants and the shared prologue macros.
const q41kIntro = `//go:build amd64 && !purego

#include "textflag.h"

// Q4_1 and Q5_1 products with Q8 activation blocks (40 bytes: f32 dx,
// int32 bias = -128*sum(q), 32 int8 q). The reference (dot32 with the
// offset term, qdot.go) is, per block,
//
//	s   = exact int32 dot of the unsigned 4- or 5-bit values and q
//	acc = acc + float32(s)*float32(d*dx)
//	acc = acc + float32(sumq)*float32(m*dx)
//
// The values are unsigned, so VPMADDUBSW and VPDPBUSD take them as they
// are and s needs no correction. sumq is -(bias>>7), exact; the kernels
// subtract float32(bias>>7)*float32(m*dx), which is the same IEEE
// operation as adding its negation.

DATA q41Mask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q41Mask0F<>(SB), RODATA|NOPTR, $32

DATA q41Ones16<>+0(SB)/8, $0x0001000100010001
DATA q41Ones16<>+8(SB)/8, $0x0001000100010001
DATA q41Ones16<>+16(SB)/8, $0x0001000100010001
DATA q41Ones16<>+24(SB)/8, $0x0001000100010001
GLOBL q41Ones16<>(SB), RODATA|NOPTR, $32

DATA q41Sixteens<>+0(SB)/8, $0x1010101010101010
DATA q41Sixteens<>+8(SB)/8, $0x1010101010101010
DATA q41Sixteens<>+16(SB)/8, $0x1010101010101010
DATA q41Sixteens<>+24(SB)/8, $0x1010101010101010
GLOBL q41Sixteens<>(SB), RODATA|NOPTR, $32

// Q5_1's high bits: value j of the low 128-bit lane (j < 16) takes qh
// byte j/8, value 16+j of the high lane qh byte 2+j/8; bit j%8 is tested.
DATA q41QhSpread<>+0(SB)/8, $0x0000000000000000
DATA q41QhSpread<>+8(SB)/8, $0x0101010101010101
DATA q41QhSpread<>+16(SB)/8, $0x0202020202020202
DATA q41QhSpread<>+24(SB)/8, $0x0303030303030303
GLOBL q41QhSpread<>(SB), RODATA|NOPTR, $32

DATA q41Bits<>+0(SB)/8, $0x8040201008040201
DATA q41Bits<>+8(SB)/8, $0x8040201008040201
DATA q41Bits<>+16(SB)/8, $0x8040201008040201
DATA q41Bits<>+24(SB)/8, $0x8040201008040201
GLOBL q41Bits<>(SB), RODATA|NOPTR, $32

// Expansion of Q4_1 and Q5_1 rows into Q8_0 blocks for packQ8Tile: the
// f16 scale d copied, the 32 unsigned values as bytes, and the f16 offset
// m of row r, block b to m + 32*b + 2*r (the layout gemmOffx4 reads).
// func(dst *byte, w *byte, rb int, rows int, nb int, m *byte)
#define EXO_PROLOGUE \
	MOVQ    dst+0(FP), DI \
	MOVQ    w+8(FP), R8 \
	MOVQ    rb+16(FP), R9 \
	MOVQ    rows+24(FP), R10 \
	MOVQ    m+40(FP), R11 \
	VMOVDQU q41Mask0F<>(SB), X15

// ---- AVX-512 VNNI: 16 weight rows against one activation row, as
// gemvQ40VNNI (expand_amd64.s): each pair of rows k, k+4 of a group of
// eight is loaded into 128-bit lanes 0 and 2, the high nibbles rotated
// into lanes 1 and 3 (VALIGNQ) and masked (VPTERNLOGD), so one VPDPBUSD
// takes 32 values of two rows against the activation block broadcast to
// both 256-bit halves. The 16 rows' (d, m) pairs are gathered as dwords
// (VPINSRD: measured a little faster than VPGATHERDD here).

// Shared frame: func(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int).
#define G41_PROLOGUE \
	MOVQ         w+0(FP), SI \
	MOVQ         rb+8(FP), CX \
	MOVQ         nb+16(FP), BX \
	MOVQ         x+24(FP), DI \
	LEAQ         (CX)(CX*2), DX \
	LEAQ         (SI)(CX*4), R8 \
	LEAQ         (R8)(CX*4), R9 \
	LEAQ         (R9)(CX*4), R10 \
	MOVQ         pfd+48(FP), R11 \
	VPBROADCASTD q41Mask0F<>(SB), Z27 \
	VPXORD       Z31, Z31, Z31 \
	LEAQ         (R8)(R11*1), R12 \
	LEAQ         (R9)(R11*1), R13 \
	LEAQ         (R10)(R11*1), R14 \
	LEAQ         (SI)(R11*1), R11

`

// q41Pairs is the VNNI row-pair macros.
const q41Pairs = `
// Rows at qlo (row k) and qhi (row k+4): nibbles into zw (xw its low 128
// bits), zt a temporary, products into acc.
#define G41_PAIR(qlo, qhi, xw, zw, zt, acc) \
	VMOVDQU      qlo, xw \
	VINSERTI32X4 $2, qhi, zw, zw \
	VPSRLW       $4, zw, zt \
	VALIGNQ      $6, zt, zt, zt \
	VPTERNLOGD   $0xa8, Z27, zt, zw \
	VPXORD       acc, acc, acc \
	VPDPBUSD     Z30, zw, acc

// Q5_1: as G41_PAIR, plus 16 under the mask of the qh bits (hlo, hhi:
// the two rows' qh words, broadcast to their 256-bit halves).
#define G51_PAIR(qlo, qhi, hlo, hhi, xw, zw, zt, zh, acc) \
	VMOVDQU      qlo, xw \
	VINSERTI32X4 $2, qhi, zw, zw \
	VPSRLW       $4, zw, zt \
	VALIGNQ      $6, zt, zt, zt \
	VPTERNLOGD   $0xa8, Z27, zt, zw \
	VPBROADCASTD hlo, zh \
	VPBROADCASTD hhi, K3, zh \
	VPSHUFB      Z28, zh, zh \
	VPTESTMB     Z29, zh, K2 \
	VPADDB       Z24, zw, K2, zw \
	VPXORD       acc, acc, acc \
	VPDPBUSD     Z30, zw, acc

// Row sums of Z8..Z15 into Z16 (lane r = row r), then the float steps of
// the block with the gathered (d, m) dwords in Z26.
`

// q41Finish is the float steps of G41_FINISH and the AVX2 macros.
const q41Finish = `	VPMOVDW         Z26, Y18 \
	VPSRLD          $16, Z26, Z19 \
	VPMOVDW         Z19, Y19 \
	VCVTPH2PS       Y18, Z18 \
	VCVTPH2PS       Y19, Z19 \
	VBROADCASTSS    (DI), Z20 \
	VMULPS          Z20, Z18, Z18 \
	VMULPS          Z20, Z19, Z19 \
	VCVTDQ2PS       Z16, Z16 \
	VMULPS          Z18, Z16, Z16 \
	VADDPS          Z16, Z31, Z31 \
	VPBROADCASTD    4(DI), Z17 \
	VPSRAD          $7, Z17, Z17 \
	VCVTDQ2PS       Z17, Z17 \
	VMULPS          Z19, Z17, Z17 \
	VSUBPS          Z17, Z31, Z31

#define G41_ADVANCE(n) \
	ADDQ $n, SI \
	ADDQ $n, R8 \
	ADDQ $n, R9 \
	ADDQ $n, R10 \
	ADDQ $n, R11 \
	ADDQ $n, R12 \
	ADDQ $n, R13 \
	ADDQ $n, R14 \
	ADDQ $40, DI

#define G41_STORE \
	MOVQ    dst+32(FP), AX \
	MOVWLZX mask+40(FP), BX \
	KMOVW   BX, K1 \
	VMOVUPS Z31, K1, (AX) \
	VZEROUPPER \
	RET

// ---- AVX2: eight weight rows against one activation row, as
// gemvQ8AVX2 (kernels_q8_amd64.s): the activation block is loaded once per
// block, each row's 32 values give 8 int32 partial sums, a VPHADDD tree
// puts the eight rows' block sums s in the lanes of Y0, and the float
// steps run for the eight rows at once. (d, m) of rows 0-3 and 4-7 are
// gathered as dwords, converted, and split by VSHUFPS (which leaves the
// rows in the qword order 0 2 1 3, undone by VPERMQ).
// func(w *byte, rb int, nb int, x *byte, dst *float32)
#define G8_PROLOGUE \
	MOVQ    w+0(FP), SI \
	MOVQ    rb+8(FP), CX \
	MOVQ    nb+16(FP), BX \
	MOVQ    x+24(FP), DI \
	LEAQ    (CX)(CX*2), DX \
	LEAQ    (SI)(CX*4), R8 \
	VMOVDQU q41Mask0F<>(SB), Y12 \
	VMOVDQU q41Ones16<>(SB), Y11 \
	VXORPS  Y15, Y15, Y15

#define G8_ROW41(addr, acc) \
	VMOVDQU     addr, X8 \
	VPSRLW      $4, X8, X9 \
	VINSERTI128 $1, X9, Y8, Y8 \
	VPAND       Y12, Y8, Y8 \
	VPMADDUBSW  Y10, Y8, Y8 \
	VPMADDWD    Y11, Y8, acc

#define G8_ROW51(qaddr, haddr, acc) \
	VMOVDQU      qaddr, X8 \
	VPSRLW       $4, X8, X9 \
	VINSERTI128  $1, X9, Y8, Y8 \
	VPAND        Y12, Y8, Y8 \
	VPBROADCASTD haddr, Y9 \
	VPSHUFB      Y13, Y9, Y9 \
	VPAND        Y14, Y9, Y9 \
	VPCMPEQB     Y14, Y9, Y9 \
	VPAND        q41Sixteens<>(SB), Y9, Y9 \
	VPOR         Y9, Y8, Y8 \
	VPMADDUBSW   Y10, Y8, Y8 \
	VPMADDWD     Y11, Y8, acc

#define G8_FINISH \
	VPHADDD      Y1, Y0, Y0 \
	VPHADDD      Y3, Y2, Y2 \
	VPHADDD      Y5, Y4, Y4 \
	VPHADDD      Y7, Y6, Y6 \
	VPHADDD      Y2, Y0, Y0 \
	VPHADDD      Y6, Y4, Y4 \
	VPERM2I128   $0x20, Y4, Y0, Y1 \
	VPERM2I128   $0x31, Y4, Y0, Y2 \
	VPADDD       Y2, Y1, Y0 \
	VMOVD        (SI), X1 \
	VPINSRD      $1, (SI)(CX*1), X1, X1 \
	VPINSRD      $2, (SI)(CX*2), X1, X1 \
	VPINSRD      $3, (SI)(DX*1), X1, X1 \
	VMOVD        (R8), X2 \
	VPINSRD      $1, (R8)(CX*1), X2, X2 \
	VPINSRD      $2, (R8)(CX*2), X2, X2 \
	VPINSRD      $3, (R8)(DX*1), X2, X2 \
	VCVTPH2PS    X1, Y1 \
	VCVTPH2PS    X2, Y2 \
	VSHUFPS      $0x88, Y2, Y1, Y3 \
	VSHUFPS      $0xdd, Y2, Y1, Y4 \
	VPERMQ       $0xd8, Y3, Y3 \
	VPERMQ       $0xd8, Y4, Y4 \
	VBROADCASTSS (DI), Y5 \
	VMULPS       Y5, Y3, Y3 \
	VMULPS       Y5, Y4, Y4 \
	VCVTDQ2PS    Y0, Y0 \
	VMULPS       Y3, Y0, Y0 \
	VADDPS       Y0, Y15, Y15 \
	VPBROADCASTD 4(DI), Y6 \
	VPSRAD       $7, Y6, Y6 \
	VCVTDQ2PS    Y6, Y6 \
	VMULPS       Y4, Y6, Y6 \
	VSUBPS       Y6, Y15, Y15

// ---- AVX2: four outputs per call, as kqQ40Dot4AVX2 (kquant_amd64.s):
// output k is weight row w + k*ws against activation row a + k*as.

#define Q41_PAIR(acc) \
	VMOVDQU      4(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VINSERTI128  $1, X3, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPMADDUBSW   8(AX), Y2, Y2 \
	VPMADDWD     Y13, Y2, acc

// Q5_1: the Q4_1 nibbles at offset 8, plus 16 where the qh bit is set.
#define Q51_PAIR(acc) \
	VMOVDQU      8(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VINSERTI128  $1, X3, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPBROADCASTD 4(BX), Y3 \
	VPSHUFB      Y12, Y3, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPCMPEQB     Y14, Y3, Y3 \
	VPAND        Y15, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPMADDUBSW   8(AX), Y2, Y2 \
	VPMADDWD     Y13, Y2, acc

#define Q41_P0 MOVQ DI, BX; MOVQ SI, AX
#define Q41_P1 LEAQ (DI)(R8*1), BX; LEAQ (SI)(R9*1), AX
#define Q41_P2 LEAQ (DI)(R8*2), BX; LEAQ (SI)(R9*2), AX
#define Q41_P3 LEAQ (DI)(R10*1), BX; LEAQ (SI)(R11*1), AX

#define Q41_HSUM(y0, y1, y2, y3, x0, x1) \
	VPHADDD      y1, y0, y0 \
	VPHADDD      y3, y2, y2 \
	VPHADDD      y2, y0, y0 \
	VEXTRACTI128 $1, y0, x1 \
	VPADDD       x1, x0, x0

// The float steps of one block for the four outputs: X8 holds s.
#define Q41_FINISH \
	VMOVD        (DI), X4 \
	LEAQ         (DI)(R8*1), BX \
	VPINSRD      $1, (BX), X4, X4 \
	LEAQ         (DI)(R8*2), BX \
	VPINSRD      $2, (BX), X4, X4 \
	LEAQ         (DI)(R10*1), BX \
	VPINSRD      $3, (BX), X4, X4 \
	VCVTPH2PS    X4, Y4 \
	VEXTRACTF128 $1, Y4, X5 \
	VSHUFPS      $0x88, X5, X4, X6 \
	VSHUFPS      $0xDD, X5, X4, X5 \
	VMOVD        (SI), X7 \
	VMOVD        4(SI), X9 \
	LEAQ         (SI)(R9*1), AX \
	VPINSRD      $1, (AX), X7, X7 \
	VPINSRD      $1, 4(AX), X9, X9 \
	LEAQ         (SI)(R9*2), AX \
	VPINSRD      $2, (AX), X7, X7 \
	VPINSRD      $2, 4(AX), X9, X9 \
	LEAQ         (SI)(R11*1), AX \
	VPINSRD      $3, (AX), X7, X7 \
	VPINSRD      $3, 4(AX), X9, X9 \
	VMULPS       X7, X6, X6 \
	VMULPS       X7, X5, X5 \
	VCVTDQ2PS    X8, X8 \
	VMULPS       X6, X8, X8 \
	VADDPS       X8, X0, X0 \
	VPSRAD       $7, X9, X9 \
	VCVTDQ2PS    X9, X9 \
	VMULPS       X5, X9, X9 \
	VSUBPS       X9, X0, X0

`

// q41Expand is the Q4_1/Q5_1 expanders.
const q41Expand = `// func expandQ41(dst *byte, w *byte, rb int, rows int, nb int, m *byte)
TEXT ·expandQ41(SB), NOSPLIT, $0-48
	EXO_PROLOGUE

x41row:
	TESTQ R10, R10
	JZ    x41done
	MOVQ  R8, SI
	MOVQ  R11, R12
	MOVQ  nb+32(FP), CX

x41blk:
	MOVWLZX (SI), AX
	MOVW    AX, (DI)
	MOVWLZX 2(SI), AX
	MOVW    AX, (R12)
	VMOVDQU 4(SI), X0
	VPSRLW  $4, X0, X1
	VPAND   X15, X0, X0
	VPAND   X15, X1, X1
	VMOVDQU X0, 2(DI)
	VMOVDQU X1, 18(DI)
	ADDQ    $20, SI
	ADDQ    $34, DI
	ADDQ    $32, R12
	DECQ    CX
	JNZ     x41blk
	ADDQ    R9, R8
	ADDQ    $2, R11
	DECQ    R10
	JMP     x41row

x41done:
	RET

// func expandQ51(dst *byte, w *byte, rb int, rows int, nb int, m *byte)
TEXT ·expandQ51(SB), NOSPLIT, $0-48
	EXO_PROLOGUE
	VMOVDQU q41Sixteens<>(SB), X14
	VMOVDQU q41QhSpread<>(SB), X13
	VMOVDQU q41QhSpread<>+16(SB), X12
	VMOVDQU q41Bits<>(SB), X11

x51row:
	TESTQ R10, R10
	JZ    x51done
	MOVQ  R8, SI
	MOVQ  R11, R12
	MOVQ  nb+32(FP), CX

x51blk:
	MOVWLZX      (SI), AX
	MOVW         AX, (DI)
	MOVWLZX      2(SI), AX
	MOVW         AX, (R12)
	VMOVDQU      8(SI), X0
	VPSRLW       $4, X0, X1
	VPAND        X15, X0, X0
	VPAND        X15, X1, X1
	VPBROADCASTD 4(SI), X2
	VPSHUFB      X12, X2, X3
	VPSHUFB      X13, X2, X2
	VPAND        X11, X2, X2
	VPAND        X11, X3, X3
	VPCMPEQB     X11, X2, X2
	VPCMPEQB     X11, X3, X3
	VPAND        X14, X2, X2
	VPAND        X14, X3, X3
	VPOR         X2, X0, X0
	VPOR         X3, X1, X1
	VMOVDQU      X0, 2(DI)
	VMOVDQU      X1, 18(DI)
	ADDQ         $24, SI
	ADDQ         $34, DI
	ADDQ         $32, R12
	DECQ         CX
	JNZ          x51blk
	ADDQ         R9, R8
	ADDQ         $2, R11
	DECQ         R10
	JMP          x51row

x51done:
	RET

`
