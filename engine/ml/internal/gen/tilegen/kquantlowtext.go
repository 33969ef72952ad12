package main

// kqlIntro is kquant_low_amd64.s's prose, constants and the macros of
// one step each (scales, bit extraction, chunk products), written once
// (see kquantlow.go).
const kqlIntro = `//go:build amd64 && !purego

#include "textflag.h"

// Q2_K and Q3_K dot products in integer arithmetic, the same contract as
// the kernels of kquant_amd64.s: output k (k < 4) is the dot product of
// the weight row at w + k*ws with the Q8_K activation row at a + k*as over
// nb super-blocks, computed exactly as dotK in qdot.go (exact int32
// super-block sums, then the float32 steps of superBlock in order). Dot4
// kernels take four weight rows and one activation row (as = 0), Row4
// kernels one weight row (ws ignored) and four activation rows.
//
// Both types store 2-bit values so that 32 bytes of a 128-value half hold
// four 32-value chunks (bit pairs 0..3); chunk j of half h is groups
// 8h+2j (bytes 0..15) and 8h+2j+1 (bytes 16..31), matching activation
// bytes 128h+32j.. . The 16 group scales are kept as int16 in the frame
// (0(SP)..31(SP)), so the pair of a chunk at activation offset off is the
// dword at off/8, spread over the two 128-bit lanes.
//
// Q3_K values are u-4 with u = low bits | hmask bit << 2 in 0..7 (unsigned,
// as VPMADDUBSW needs), so isum = sum sc*dot(u,q) - 4*sum sc*bsum; the
// second term is the accumulator's start value. All sums stay far inside
// int32 and the int16 pair sums of VPMADDUBSW (at most 2*7*127) never
// saturate.

#define ACT_BLOCK 292
#define ACT_SCALE 256
#define ACT_SUMS16 260

DATA kqlMask03<>+0(SB)/8, $0x0303030303030303
DATA kqlMask03<>+8(SB)/8, $0x0303030303030303
DATA kqlMask03<>+16(SB)/8, $0x0303030303030303
DATA kqlMask03<>+24(SB)/8, $0x0303030303030303
GLOBL kqlMask03<>(SB), RODATA|NOPTR, $32

DATA kqlMask04<>+0(SB)/8, $0x0404040404040404
DATA kqlMask04<>+8(SB)/8, $0x0404040404040404
DATA kqlMask04<>+16(SB)/8, $0x0404040404040404
DATA kqlMask04<>+24(SB)/8, $0x0404040404040404
GLOBL kqlMask04<>(SB), RODATA|NOPTR, $32

DATA kqlMask07<>+0(SB)/8, $0x0707070707070707
DATA kqlMask07<>+8(SB)/8, $0x0707070707070707
DATA kqlMask07<>+16(SB)/8, $0x0707070707070707
DATA kqlMask07<>+24(SB)/8, $0x0707070707070707
GLOBL kqlMask07<>(SB), RODATA|NOPTR, $32

DATA kqlMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqlMask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqlMask0F<>(SB), RODATA|NOPTR, $16

DATA kqlWords32<>+0(SB)/8, $0x0020002000200020
DATA kqlWords32<>+8(SB)/8, $0x0020002000200020
DATA kqlWords32<>+16(SB)/8, $0x0020002000200020
DATA kqlWords32<>+24(SB)/8, $0x0020002000200020
GLOBL kqlWords32<>(SB), RODATA|NOPTR, $32

// Spreads the two int16 of a broadcast dword: word 0 over the low 128
// bits, word 1 over the high 128 bits.
DATA kqlSpread2<>+0(SB)/8, $0x0100010001000100
DATA kqlSpread2<>+8(SB)/8, $0x0100010001000100
DATA kqlSpread2<>+16(SB)/8, $0x0302030203020302
DATA kqlSpread2<>+24(SB)/8, $0x0302030203020302
GLOBL kqlSpread2<>(SB), RODATA|NOPTR, $32

// Pointers of pair k: BX = weight block, AX = activation block.
#define PAIR0 MOVQ DI, BX; MOVQ SI, AX
#define PAIR1 LEAQ (DI)(R8*1), BX; LEAQ (SI)(R9*1), AX
#define PAIR2 LEAQ (DI)(R8*2), BX; LEAQ (SI)(R9*2), AX
#define PAIR3 LEAQ (DI)(R10*1), BX; LEAQ (SI)(R11*1), AX

` + kqHsumActScales + `
// Q2_K: sums the four outputs' isum (Y8..Y11) and msum (Y12..Y15) vectors
// and adds acc + (float32(d*dx)*isum - float32(dmin*dx)*msum) to X0, d and
// dmin being the f16 pair at byte 80 of each weight block.
#define Q2K_FINISH \
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9) \
	HSUM4x8(Y12, Y13, Y14, Y15, X12, X13) \
	VMOVD   80(DI), X4 \
	LEAQ    (DI)(R8*1), BX \
	VPINSRD $1, 80(BX), X4, X4 \
	LEAQ    (DI)(R8*2), BX \
	VPINSRD $2, 80(BX), X4, X4 \
	LEAQ    (DI)(R10*1), BX \
	VPINSRD $3, 80(BX), X4, X4 \
	VCVTPH2PS X4, Y4 \
	VEXTRACTF128 $1, Y4, X5 \
	VSHUFPS $0x88, X5, X4, X6 \
	VSHUFPS $0xDD, X5, X4, X5 \
	ACT_SCALES \
	VMULPS  X7, X6, X6 \
	VMULPS  X7, X5, X5 \
	VCVTDQ2PS X8, X8 \
	VMULPS  X6, X8, X8 \
	VCVTDQ2PS X12, X12 \
	VMULPS  X5, X12, X12 \
	VSUBPS  X12, X8, X8 \
	VADDPS  X8, X0, X0

// Q3_K: sums the four outputs' isum vectors (Y8..Y11) and adds
// acc + float32(d*dx)*isum to X0 (superBlock with dmin = 0 and msum = 0:
// the subtracted term is a zero, which leaves every sum unchanged as the
// accumulator is never -0), d being the f16 at byte 108.
#define Q3K_FINISH \
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9) \
	VPXOR   X4, X4, X4 \
	VPINSRW $0, 108(DI), X4, X4 \
	LEAQ    (DI)(R8*1), BX \
	VPINSRW $1, 108(BX), X4, X4 \
	LEAQ    (DI)(R8*2), BX \
	VPINSRW $2, 108(BX), X4, X4 \
	LEAQ    (DI)(R10*1), BX \
	VPINSRW $3, 108(BX), X4, X4 \
	VCVTPH2PS X4, X6 \
	ACT_SCALES \
	VMULPS  X7, X6, X6 \
	VCVTDQ2PS X8, X8 \
	VMULPS  X6, X8, X8 \
	VADDPS  X8, X0, X0

// Q2_K scales (low nibbles) of the block at wb as int16 into the frame,
// mins (high nibbles) as int16 into mins. Uses X2, X3.
#define Q2K_SCALES(wb, mins) \
	VMOVDQU      (wb), X2 \
	VPAND        kqlMask0F<>(SB), X2, X3 \
	VPMOVZXBW    X3, Y3 \
	VMOVDQU      Y3, 0(SP) \
	VPSRLW       $4, X2, X2 \
	VPAND        kqlMask0F<>(SB), X2, X2 \
	VPMOVZXBW    X2, mins

// Q3_K's twelve bytes of 6-bit scales of the block at wb, unpacked as
// q3KScales (dequant.go) into 16 int16 (biased by -32) in Y2 and the
// frame. The four dwords are assembled in CX (low qword) and R12 (high).
// Uses CX, DX, R12, R13, R14.
#define Q3K_SCALES(wb) \
	MOVL         96(wb), CX \
	MOVL         CX, R12 \
	MOVL         104(wb), DX \
	ANDL         $0x0f0f0f0f, CX \
	MOVL         DX, R14 \
	SHLL         $4, R14 \
	ANDL         $0x30303030, R14 \
	ORL          R14, CX \
	SHRL         $4, R12 \
	ANDL         $0x0f0f0f0f, R12 \
	MOVL         DX, R14 \
	ANDL         $0x30303030, R14 \
	ORL          R14, R12 \
	MOVL         100(wb), R13 \
	ANDL         $0x0f0f0f0f, R13 \
	MOVL         DX, R14 \
	SHLL         $2, R14 \
	ANDL         $0x30303030, R14 \
	ORL          R14, R13 \
	SHLQ         $32, R13 \
	ORQ          R13, CX \
	MOVL         100(wb), R13 \
	SHRL         $4, R13 \
	ANDL         $0x0f0f0f0f, R13 \
	SHRL         $2, DX \
	ANDL         $0x30303030, DX \
	ORL          DX, R13 \
	SHLQ         $32, R13 \
	ORQ          R13, R12 \
	VMOVQ        CX, X2 \
	VPINSRQ      $1, R12, X2, X2 \
	VPMOVZXBW    X2, Y2 \
	VPSUBW       kqlWords32<>(SB), Y2, Y2 \
	VMOVDQU      Y2, 0(SP)

// Chunk values into Y3: Q2_K bit pair of Y2 shifted by n; Q3_K the same
// plus the hmask bit of Y4 moved to bit 2 by op $hn (Y12 = 0x04 bytes).
#define Q2K_BITS(n) \
	VPSRLW       $n, Y2, Y3 \
	VPAND        Y1, Y3, Y3

#define Q2K_BITS0 \
	VPAND        Y1, Y2, Y3

#define Q3K_BITS(n, op, hn) \
	VPSRLW       $n, Y2, Y3 \
	VPAND        Y1, Y3, Y3 \
	op           $hn, Y4, Y5 \
	VPAND        Y12, Y5, Y5 \
	VPOR         Y5, Y3, Y3

#define Q3K_BITS_L0(op, hn) \
	VPAND        Y1, Y2, Y3 \
	op           $hn, Y4, Y5 \
	VPAND        Y12, Y5, Y5 \
	VPOR         Y5, Y3, Y3

#define Q3K_BITS_H0(n) \
	VPSRLW       $n, Y2, Y3 \
	VPAND        Y1, Y3, Y3 \
	VPAND        Y12, Y4, Y5 \
	VPOR         Y5, Y3, Y3

// The VNNI kernels merge the two masked parts in one VPTERNLOGD: 0xE4 is
// (dst & Y1) | (src & ^Y1) and 0xD8 (src & Y1) | (dst & ^Y1); the final
// AND with 0x07 bytes (Y14) drops the hmask bits shifted past bit 2.
#define Q3K_BITSV(n, op, hn) \
	VPSRLW       $n, Y2, Y3 \
	op           $hn, Y4, Y5 \
	VPTERNLOGD   $0xE4, Y1, Y5, Y3 \
	VPAND        Y14, Y3, Y3

#define Q3K_BITSV_L0(op, hn) \
	op           $hn, Y4, Y5 \
	VPTERNLOGD   $0xD8, Y1, Y2, Y5 \
	VPAND        Y14, Y5, Y3

#define Q3K_BITSV_H0(n) \
	VPSRLW       $n, Y2, Y3 \
	VPTERNLOGD   $0xE4, Y1, Y4, Y3 \
	VPAND        Y14, Y3, Y3

// One chunk (in Y3) at activation offset off of a Dot4 pair: scale-weighted
// dot into acc. The VNNI form fuses the scale multiply-add.
#define PART(off, acc, spread) \
	VPMADDUBSW   (off)(AX), Y3, Y7 \
	VPBROADCASTD ((off)/8)(SP), Y6 \
	VPSHUFB      spread, Y6, Y6 \
	VPMADDWD     Y6, Y7, Y7 \
	VPADDD       Y7, acc, acc

#define PARTV(off, acc, spread) \
	VPMADDUBSW   (off)(AX), Y3, Y7 \
	VPBROADCASTD ((off)/8)(SP), Y6 \
	VPSHUFB      spread, Y6, Y6 \
	VPDPWSSD     Y6, Y7, acc

// One chunk (in Y3) against the four activation rows of a Row4 kernel,
// into Y8..Y11.
#define R4PART(off, spread) \
	VPBROADCASTD ((off)/8)(SP), Y6 \
	VPSHUFB      spread, Y6, Y6 \
	VPMADDUBSW   (off)(SI), Y3, Y7 \
	VPMADDWD     Y6, Y7, Y7 \
	VPADDD       Y7, Y8, Y8 \
	VPMADDUBSW   (off)(SI)(R9*1), Y3, Y7 \
	VPMADDWD     Y6, Y7, Y7 \
	VPADDD       Y7, Y9, Y9 \
	VPMADDUBSW   (off)(SI)(R9*2), Y3, Y7 \
	VPMADDWD     Y6, Y7, Y7 \
	VPADDD       Y7, Y10, Y10 \
	VPMADDUBSW   (off)(SI)(R11*1), Y3, Y7 \
	VPMADDWD     Y6, Y7, Y7 \
	VPADDD       Y7, Y11, Y11

#define R4PARTV(off, spread) \
	VPBROADCASTD ((off)/8)(SP), Y6 \
	VPSHUFB      spread, Y6, Y6 \
	VPMADDUBSW   (off)(SI), Y3, Y7 \
	VPDPWSSD     Y6, Y7, Y8 \
	VPMADDUBSW   (off)(SI)(R9*1), Y3, Y7 \
	VPDPWSSD     Y6, Y7, Y9 \
	VPMADDUBSW   (off)(SI)(R9*2), Y3, Y7 \
	VPDPWSSD     Y6, Y7, Y10 \
	VPMADDUBSW   (off)(SI)(R11*1), Y3, Y7 \
	VPDPWSSD     Y6, Y7, Y11

`
