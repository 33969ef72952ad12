package main

// Verbatim parts of iq4xs_amd64.s (see iq4xs.go): prose, DATA and the
// macros of one step each, written once.

// iqxIntro is the prose, constants and the Dot4 kernels' macros.
const iqxIntro = `//go:build amd64 && !purego

#include "textflag.h"

// IQ4_XS products with Q8_K activation blocks (see dotK in qdot.go):
// per super-block isum = sum over the eight sub-blocks of 32 of
// (ls-32)*dot(kvalues[nibble], q), exact in int32, then
// acc + float32(d*dx)*float32(isum). superBlock's min term m is a zero
// of either sign: a - m is a except for the sign of a zero a, and acc
// (which starts at +0 and so is never -0) plus a zero of either sign is
// acc, so leaving m out gives the same bits.
//
// Four outputs per call, as kqQ4KDot4AVX2: output k is the weight row at
// w + k*ws against the activation row at a + k*as over nb super-blocks.
//
// The code book values are signed, so the AVX2 kernels use the sign
// trick: VPMADDUBSW(|w|, q*sign(w)). It is exact because a Q8_K
// activation is never -128 (quantizeActQ8K rounds values of magnitude at
// most 127), so q*sign(w) fits in int8, and a pair sum is at most
// 2*127*127 < 2^15. The VNNI kernel takes the code book plus 128 instead.

#define ACT_BLOCK 292
#define ACT_SCALE 256
#define ACT_SUMS16 260

DATA iqxMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqxMask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqxMask0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqxMask0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iqxMask0F<>(SB), RODATA|NOPTR, $32

// The IQ4_NL code book plus 128 (unsigned, for VPDPBUSD).
DATA iqxBookU<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA iqxBookU<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL iqxBookU<>(SB), RODATA|NOPTR, $16

// The IQ4_NL code book in both 128-bit lanes.
DATA iqxBook<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iqxBook<>+8(SB)/8, $0x7159453526190d01
DATA iqxBook<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA iqxBook<>+24(SB)/8, $0x7159453526190d01
GLOBL iqxBook<>(SB), RODATA|NOPTR, $32

// Shift counts that bring the high scale bits of sub-block ib (bits 2ib,
// 2ib+1 of the u16 at offset 2) to bit 0 of dword ib, from the dword at
// offset 0.
DATA iqxShifts<>+0(SB)/8, $0x0000001200000010
DATA iqxShifts<>+8(SB)/8, $0x0000001600000014
DATA iqxShifts<>+16(SB)/8, $0x0000001a00000018
DATA iqxShifts<>+24(SB)/8, $0x0000001e0000001c
GLOBL iqxShifts<>(SB), RODATA|NOPTR, $32

DATA iqxThree<>+0(SB)/8, $0x0000000300000003
DATA iqxThree<>+8(SB)/8, $0x0000000300000003
DATA iqxThree<>+16(SB)/8, $0x0000000300000003
DATA iqxThree<>+24(SB)/8, $0x0000000300000003
GLOBL iqxThree<>(SB), RODATA|NOPTR, $32

DATA iqx32<>+0(SB)/8, $0x0000002000000020
DATA iqx32<>+8(SB)/8, $0x0000002000000020
DATA iqx32<>+16(SB)/8, $0x0000002000000020
DATA iqx32<>+24(SB)/8, $0x0000002000000020
GLOBL iqx32<>(SB), RODATA|NOPTR, $32

#define IQX_P0 MOVQ DI, BX; MOVQ SI, AX
#define IQX_P1 LEAQ (DI)(R8*1), BX; LEAQ (SI)(R9*1), AX
#define IQX_P2 LEAQ (DI)(R8*2), BX; LEAQ (SI)(R9*2), AX
#define IQX_P3 LEAQ (DI)(R10*1), BX; LEAQ (SI)(R11*1), AX

// The eight scales ls-32 of the weight block at BX, as int32 at frame
// bytes 16..47 (the low int16 of each is the scale for VPBROADCASTW).
#define IQX_SCALES \
	VMOVD        4(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VPUNPCKLBW   X3, X2, X2 \
	VPAND        X1, X2, X2 \
	VPMOVZXBD    X2, Y2 \
	VPBROADCASTD (BX), Y3 \
	VPSRLVD      Y13, Y3, Y3 \
	VPAND        iqxThree<>(SB), Y3, Y3 \
	VPSLLD       $4, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPSUBD       iqx32<>(SB), Y2, Y2 \
	VMOVDQU      Y2, 16(SP)

// Sub-block ib: values j and 16+j are the low and high nibbles of byte
// 8+16*ib+j; into 16-bit pair sums, then scaled into acc by madd.
#define IQX_VALUES(ib) \
	VMOVDQU      (8+16*ib)(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VINSERTI128  $1, X3, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPSHUFB      Y2, Y12, Y2 \
	VMOVDQU      (32*ib)(AX), Y3 \
	VPSIGNB      Y2, Y3, Y3 \
	VPSIGNB      Y2, Y2, Y2 \
	VPMADDUBSW   Y3, Y2, Y2 \
	VPBROADCASTW (16+4*ib)(SP), Y4

#define IQX_SUB(ib, acc) \
	IQX_VALUES(ib) \
	VPMADDWD     Y4, Y2, Y2 \
	VPADDD       Y2, acc, acc

#define IQX_PAIR(sub, acc) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	IQX_SCALES \
	VPXOR        acc, acc, acc \
	sub(0, acc) \
	sub(1, acc) \
	sub(2, acc) \
	sub(3, acc) \
	sub(4, acc) \
	sub(5, acc) \
	sub(6, acc) \
	sub(7, acc)

#define IQX_HSUM4x8(y0, y1, y2, y3, x0, x1) \
	VPHADDD      y1, y0, y0 \
	VPHADDD      y3, y2, y2 \
	VPHADDD      y2, y0, y0 \
	VEXTRACTI128 $1, y0, x1 \
	VPADDD       x1, x0, x0

// acc + float32(d*dx)*float32(isum) for the four outputs.
#define IQX_FINISH \
	IQX_HSUM4x8(Y8, Y9, Y10, Y11, X8, X9) \
	VPXOR     X4, X4, X4 \
	VPINSRW   $0, (DI), X4, X4 \
	LEAQ      (DI)(R8*1), BX \
	VPINSRW   $1, (BX), X4, X4 \
	LEAQ      (DI)(R8*2), BX \
	VPINSRW   $2, (BX), X4, X4 \
	LEAQ      (DI)(R10*1), BX \
	VPINSRW   $3, (BX), X4, X4 \
	VCVTPH2PS X4, X6 \
	VMOVD     ACT_SCALE(SI), X7 \
	LEAQ      (SI)(R9*1), AX \
	VPINSRD   $1, ACT_SCALE(AX), X7, X7 \
	LEAQ      (SI)(R9*2), AX \
	VPINSRD   $2, ACT_SCALE(AX), X7, X7 \
	LEAQ      (SI)(R11*1), AX \
	VPINSRD   $3, ACT_SCALE(AX), X7, X7 \
	VMULPS    X7, X6, X6 \
	VCVTDQ2PS X8, X8 \
	VMULPS    X6, X8, X8 \
	VADDPS    X8, X0, X0

#define IQX_PROLOGUE \
	MOVQ    w+0(FP), DI \
	MOVQ    ws+8(FP), R8 \
	MOVQ    a+16(FP), SI \
	MOVQ    as+24(FP), R9 \
	LEAQ    (R8)(R8*2), R10 \
	LEAQ    (R9)(R9*2), R11 \
	VMOVDQU iqxMask0F<>(SB), Y1 \
	VMOVDQU iqxBook<>(SB), Y12 \
	VMOVDQU iqxShifts<>(SB), Y13 \
	VXORPS  X0, X0, X0

// AVX-512 VNNI: two sub-blocks per instruction, without the sign trick.
// The 32 bytes of sub-blocks 2c and 2c+1 with their high nibbles give
// 128-bit lanes [lo(2c), hi(2c), lo(2c+1), hi(2c+1)] (VINSERTI64X4,
// VSHUFI64X2), matching the 64 activation bytes at 64c; VPSHUFB maps them
// to the code book plus 128 (unsigned), VPDPBUSD dots them with q exactly,
// and VPMULLD scales the dword lanes (scale 2c in the low 8, 2c+1 in the
// high 8, K3 = 0xff00). The +128 is taken out up front: acc starts at
// -128*sum_g sc_g*bsum_g (VPMADDWD of the activation's sums of 16 with
// the scales, each in both words of its dword).
#define IQX_SUBZ(c, acc) \
	VMOVDQU        (8+32*c)(BX), Y2 \
	VPSRLW         $4, Y2, Y3 \
	VINSERTI64X4   $1, Y3, Z2, Z2 \
	VSHUFI64X2     $0xd8, Z2, Z2, Z2 \
	VPANDD         Z14, Z2, Z2 \
	VPSHUFB        Z2, Z12, Z2 \
	VPXORD         Z5, Z5, Z5 \
	VPDPBUSD       (64*c)(AX), Z2, Z5 \
	VPBROADCASTD   (16+8*c)(SP), Z4 \
	VPBROADCASTD   (20+8*c)(SP), K3, Z4 \
	VPMULLD        Z4, Z5, Z5 \
	VPADDD         Z5, acc, acc

#define IQX_PAIRZ(acc, y) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	IQX_SCALES \
	VPSLLD       $16, Y2, Y3 \
	VPBLENDW     $0xaa, Y3, Y2, Y3 \
	VPMADDWD     ACT_SUMS16(AX), Y3, Y3 \
	VPSLLD       $7, Y3, Y3 \
	VPXOR        y, y, y \
	VPSUBD       Y3, y, y \
	IQX_SUBZ(0, acc) \
	IQX_SUBZ(1, acc) \
	IQX_SUBZ(2, acc) \
	IQX_SUBZ(3, acc) \
	VEXTRACTI64X4 $1, acc, Y4 \
	VPADDD       Y4, y, y

// Expansion of IQ4_XS rows for packQ8Tile (see iq4xsgemm_amd64.s): each
// sub-block becomes a Q8_0 block whose f16 scale is ls-32 and whose
// values are the code book entries; d goes to d + 32*block + 2*row.
#define EXX_SUB(ib) \
	MOVL       R14, AX \
	SHRL       $(4*ib), AX \
	ANDL       $15, AX \
	MOVL       R13, R15 \
	SHRL       $(2*ib), R15 \
	ANDL       $3, R15 \
	SHLL       $4, R15 \
	ORL        R15, AX \
	SUBL       $32, AX \
	VCVTSI2SSL AX, X5, X5 \
	VCVTPS2PH  $0, X5, X5 \
	VMOVD      X5, AX \
	MOVW       AX, (DI) \
	VMOVDQU    (8+16*ib)(SI), X0 \
	VPSRLW     $4, X0, X1 \
	VPAND      X15, X0, X0 \
	VPAND      X15, X1, X1 \
	VPSHUFB    X0, X14, X0 \
	VPSHUFB    X1, X14, X1 \
	VMOVDQU    X0, 2(DI) \
	VMOVDQU    X1, 18(DI) \
	ADDQ       $34, DI

`

// iqxRowMacros are the macros of kqIQ4XSRow4AVX2.
const iqxRowMacros = `#define IQX_RACT(addr, acc) \
	VMOVDQU    addr, Y5 \
	VPSIGNB    Y2, Y5, Y5 \
	VPMADDUBSW Y5, Y3, Y5 \
	VPMADDWD   Y4, Y5, Y5 \
	VPADDD     Y5, acc, acc

#define IQX_RSUB(ib) \
	VMOVDQU      (8+16*ib)(DI), X2 \
	VPSRLW       $4, X2, X3 \
	VINSERTI128  $1, X3, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPSHUFB      Y2, Y12, Y2 \
	VPABSB       Y2, Y3 \
	VPBROADCASTW (16+4*ib)(SP), Y4 \
	IQX_RACT((32*ib)(SI), Y8) \
	IQX_RACT((32*ib)(SI)(R9*1), Y9) \
	IQX_RACT((32*ib)(SI)(R9*2), Y10) \
	IQX_RACT((32*ib)(SI)(R11*1), Y11)

`

// iqxZMacros are the macros of kqIQ4XSDot4VNNIZ.
const iqxZMacros = `// kqIQ4XSDot4VNNIZ: one activation row (as is ignored) against four
// weight rows, on 512-bit vectors with a sub-block per 128-bit lane. The
// 64 bytes of nibbles of sub-blocks 4h..4h+3 (half h of a super-block)
// hold sub-block 4h+l in lane l, its values 0..15 in the low nibbles and
// 16..31 in the high ones; the activation values are arranged once per
// super-block into the same order (VSHUFI64X2 of the 128 bytes of the
// half: Z20, Z21 for half 0, Z22, Z23 for half 1) and serve the four
// rows. VPSHUFB maps the nibbles to the code book plus 128 (unsigned)
// and two VPDPBUSD dot them with q into dword lanes that all belong to
// one sub-block, so one VPMULLD by the lane-broadcast scales ls-32 (Z28,
// Z29: VPERMD of the eight scales) scales a half. The +128 is taken out
// by starting each half's lanes at Z16, Z17 = -128 times the activation's
// lane sums (once per super-block: VPDPBUSD of 0x80 bytes): the lanes of
// a sub-block then sum to dot(kvalues[nibble], q) and the products to the
// same exact int32 isum as the other kernels'.
DATA iqxLane0<>+0(SB)/8, $0
DATA iqxLane0<>+8(SB)/8, $0
DATA iqxLane0<>+16(SB)/8, $0x0000000100000001
DATA iqxLane0<>+24(SB)/8, $0x0000000100000001
DATA iqxLane0<>+32(SB)/8, $0x0000000200000002
DATA iqxLane0<>+40(SB)/8, $0x0000000200000002
DATA iqxLane0<>+48(SB)/8, $0x0000000300000003
DATA iqxLane0<>+56(SB)/8, $0x0000000300000003
GLOBL iqxLane0<>(SB), RODATA|NOPTR, $64

DATA iqxLane1<>+0(SB)/8, $0x0000000400000004
DATA iqxLane1<>+8(SB)/8, $0x0000000400000004
DATA iqxLane1<>+16(SB)/8, $0x0000000500000005
DATA iqxLane1<>+24(SB)/8, $0x0000000500000005
DATA iqxLane1<>+32(SB)/8, $0x0000000600000006
DATA iqxLane1<>+40(SB)/8, $0x0000000600000006
DATA iqxLane1<>+48(SB)/8, $0x0000000700000007
DATA iqxLane1<>+56(SB)/8, $0x0000000700000007
GLOBL iqxLane1<>(SB), RODATA|NOPTR, $64

// The eight scales ls-32 of the weight block at BX as int32 in Y2
// (IQX_SCALES without the store to the frame).
#define IQXZ_SCALES \
	VMOVD        4(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VPUNPCKLBW   X3, X2, X2 \
	VPAND        X1, X2, X2 \
	VPMOVZXBD    X2, Y2 \
	VPBROADCASTD (BX), Y3 \
	VPSRLVD      Y13, Y3, Y3 \
	VPAND        iqxThree<>(SB), Y3, Y3 \
	VPSLLD       $4, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPSUBD       iqx32<>(SB), Y2, Y2

// Half h of the activation block at SI in the nibble order into lo, hi;
// c gets -128 times their dword lanes' sums. Uses Z24..Z26.
#define IQXZ_ACT(h, lo, hi, c) \
	VMOVDQU64  (128*h)(SI), Z24 \
	VMOVDQU64  (128*h+64)(SI), Z25 \
	VSHUFI64X2 $0x88, Z25, Z24, lo \
	VSHUFI64X2 $0xdd, Z25, Z24, hi \
	VPXORD     Z26, Z26, Z26 \
	VPDPBUSD   lo, Z15, Z26 \
	VPDPBUSD   hi, Z15, Z26 \
	VPSUBD     Z26, Z30, c

// Half h of the row at BX: the scaled dword lanes into dst (Z24, Z25 and
// tmp are clobbered).
#define IQXZ_HALF(h, lo, hi, c, sc, tmp, dst) \
	VMOVDQU64  (8+64*h)(BX), Z24 \
	VPSRLW     $4, Z24, Z25 \
	VPANDD     Z14, Z24, Z24 \
	VPANDD     Z14, Z25, Z25 \
	VPSHUFB    Z24, Z12, Z24 \
	VPSHUFB    Z25, Z12, Z25 \
	VMOVDQA64  c, tmp \
	VPDPBUSD   lo, Z24, tmp \
	VPDPBUSD   hi, Z25, tmp \
	VPMULLD    sc, tmp, dst

// One row's isum as 8 int32 lanes in y (acc is y's ZMM).
#define IQXZ_ROW(acc, y) \
	PREFETCHT0    (BX)(R8*4) \
	PREFETCHT0    64(BX)(R8*4) \
	PREFETCHT0    128(BX)(R8*4) \
	IQXZ_SCALES \
	VPERMD        Z2, Z18, Z28 \
	VPERMD        Z2, Z19, Z29 \
	IQXZ_HALF(0, Z20, Z21, Z16, Z28, Z26, acc) \
	IQXZ_HALF(1, Z22, Z23, Z17, Z29, Z27, Z27) \
	VPADDD        Z27, acc, acc \
	VEXTRACTI64X4 $1, acc, Y24 \
	VPADDD        Y24, y, y

`

// iqxMMacros are the macros of kqIQ4XSDot4VNNIM.
const iqxMMacros = `// kqIQ4XSDot4VNNIM is kqIQ4XSDot4VNNIZ with the scales decoded straight
// into their lanes: VPMULTISHIFTQB of the block's first eight bytes
// (d, scales_h, scales_l) puts, in every dword of sub-block ib's lane, the
// bits of scales_l from 4ib in byte 0 and those of scales_h from 2ib (at
// bit 4) in byte 1; masked to 0x0f and 0x30, VPDPBUSD with the bytes
// (1, 1, 0, 0) onto -32 sums them into ls-32 (8 vector instructions per
// row for the scales of both halves, against 13). The activation's scale
// is the same for the four rows (one activation row), loaded once.
DATA iqxCtl0<>+0(SB)/8, $0x00000c2000000c20
DATA iqxCtl0<>+8(SB)/8, $0x00000c2000000c20
DATA iqxCtl0<>+16(SB)/8, $0x00000e2400000e24
DATA iqxCtl0<>+24(SB)/8, $0x00000e2400000e24
DATA iqxCtl0<>+32(SB)/8, $0x0000102800001028
DATA iqxCtl0<>+40(SB)/8, $0x0000102800001028
DATA iqxCtl0<>+48(SB)/8, $0x0000122c0000122c
DATA iqxCtl0<>+56(SB)/8, $0x0000122c0000122c
GLOBL iqxCtl0<>(SB), RODATA|NOPTR, $64

DATA iqxCtl1<>+0(SB)/8, $0x0000143000001430
DATA iqxCtl1<>+8(SB)/8, $0x0000143000001430
DATA iqxCtl1<>+16(SB)/8, $0x0000163400001634
DATA iqxCtl1<>+24(SB)/8, $0x0000163400001634
DATA iqxCtl1<>+32(SB)/8, $0x0000183800001838
DATA iqxCtl1<>+40(SB)/8, $0x0000183800001838
DATA iqxCtl1<>+48(SB)/8, $0x00001a3c00001a3c
DATA iqxCtl1<>+56(SB)/8, $0x00001a3c00001a3c
GLOBL iqxCtl1<>(SB), RODATA|NOPTR, $64

// The lane-broadcast scales ls-32 of half h (ctl) of the block at BX.
#define IQXM_SCALES(ctl, dst) \
	VPMULTISHIFTQB.BCST (BX), ctl, Z3 \
	VPANDD       Z31, Z3, Z3 \
	VMOVDQA64    Z13, dst \
	VPDPBUSD     Z5, Z3, dst

// One row's isum as 8 int32 lanes in y (acc is y's ZMM).
#define IQXM_ROW(acc, y) \
	PREFETCHT0    (BX)(R8*4) \
	PREFETCHT0    64(BX)(R8*4) \
	PREFETCHT0    128(BX)(R8*4) \
	IQXM_SCALES(Z18, Z28) \
	IQXM_SCALES(Z19, Z29) \
	IQXZ_HALF(0, Z20, Z21, Z16, Z28, Z26, acc) \
	IQXZ_HALF(1, Z22, Z23, Z17, Z29, Z27, Z27) \
	VPADDD        Z27, acc, acc

// The four rows' 16 dword lanes (Z8..Z11) summed into the dwords of X8,
// with single-operation shuffles (VPHADDD is several): pairs of rows
// interleaved and added, then the pairs, then the four 128-bit lanes.
#define IQXM_HSUM \
	VPUNPCKLQDQ   Z9, Z8, Z24 \
	VPUNPCKHQDQ   Z9, Z8, Z25 \
	VPADDD        Z25, Z24, Z24 \
	VPUNPCKLQDQ   Z11, Z10, Z26 \
	VPUNPCKHQDQ   Z11, Z10, Z27 \
	VPADDD        Z27, Z26, Z26 \
	VSHUFPS       $0x88, Z26, Z24, Z25 \
	VSHUFPS       $0xdd, Z26, Z24, Z27 \
	VPADDD        Z27, Z25, Z25 \
	VEXTRACTI64X4 $1, Z25, Y24 \
	VPADDD        Y24, Y25, Y25 \
	VEXTRACTI32X4 $1, Y25, X24 \
	VPADDD        X24, X25, X8

// IQX_FINISH with the activation scale in X7 (loaded once per block).
#define IQXM_FINISH \
	IQXM_HSUM \
	VPXOR     X4, X4, X4 \
	VPINSRW   $0, (DI), X4, X4 \
	LEAQ      (DI)(R8*1), BX \
	VPINSRW   $1, (BX), X4, X4 \
	LEAQ      (DI)(R8*2), BX \
	VPINSRW   $2, (BX), X4, X4 \
	LEAQ      (DI)(R10*1), BX \
	VPINSRW   $3, (BX), X4, X4 \
	VCVTPH2PS X4, X6 \
	VMULPS    X7, X6, X6 \
	VCVTDQ2PS X8, X8 \
	VMULPS    X6, X8, X8 \
	VADDPS    X8, X0, X0

`

// iqxAMacros are the macros of kqIQ4XSDot4VNNIA and iqxArrangeAct.
const iqxAMacros = `// kqIQ4XSDot4VNNIA is kqIQ4XSDot4VNNIM reading the activation arranged
// once per activation row by iqxArrangeAct (blocks of IQXA_BLOCK bytes:
// IQXZ_ACT's four vectors of values, then its two vectors of -128 x the
// lane sums, then the f32 scale) instead of once per super-block and four
// weight rows: the multiply-adds take the activation as memory operands.
#define IQXA_BLOCK 448
#define IQXA_SUMS 256
#define IQXA_SCALE 384

// func iqxArrangeAct(dst *byte, a *byte, nb int)
TEXT ·iqxArrangeAct(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         a+8(FP), SI
	MOVQ         nb+16(FP), CX
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z15
	VPXORD       Z30, Z30, Z30

iqxArrLoop:
	IQXZ_ACT(0, Z20, Z21, Z16)
	IQXZ_ACT(1, Z22, Z23, Z17)
	VMOVDQU64    Z20, (DI)
	VMOVDQU64    Z21, 64(DI)
	VMOVDQU64    Z22, 128(DI)
	VMOVDQU64    Z23, 192(DI)
	VMOVDQU64    Z16, IQXA_SUMS(DI)
	VMOVDQU64    Z17, (IQXA_SUMS+64)(DI)
	MOVL         ACT_SCALE(SI), AX
	MOVL         AX, IQXA_SCALE(DI)
	ADDQ         $ACT_BLOCK, SI
	ADDQ         $IQXA_BLOCK, DI
	DECQ         CX
	JNZ          iqxArrLoop
	VZEROUPPER
	RET

// IQXZ_HALF with the arranged activation at SI. VPERMB looks up the low
// six bits of each byte in the code book repeated four times (Z12), so
// the bits above a nibble need no mask.
#define IQXA_HALF(h, sc, tmp, dst) \
	VMOVDQU64  (8+64*h)(BX), Z24 \
	VPSRLW     $4, Z24, Z25 \
	VPERMB     Z12, Z24, Z24 \
	VPERMB     Z12, Z25, Z25 \
	VMOVDQU64  (IQXA_SUMS+64*h)(SI), tmp \
	VPDPBUSD   (128*h)(SI), Z24, tmp \
	VPDPBUSD   (128*h+64)(SI), Z25, tmp \
	VPMULLD    sc, tmp, dst

// The prefetches run R12 bytes ahead (PF_DIST: for long rows, such as
// the 8B shape's ffn_down, more than the next call's four rows), in place
// of matvecK's per-call burst.
// IQXM_HSUM for any four rows' lanes (z0..z3) into x.
#define IQX_HSUM16(z0, z1, z2, z3, x) \
	VPUNPCKLQDQ   z1, z0, Z24 \
	VPUNPCKHQDQ   z1, z0, Z25 \
	VPADDD        Z25, Z24, Z24 \
	VPUNPCKLQDQ   z3, z2, Z26 \
	VPUNPCKHQDQ   z3, z2, Z27 \
	VPADDD        Z27, Z26, Z26 \
	VSHUFPS       $0x88, Z26, Z24, Z25 \
	VSHUFPS       $0xdd, Z26, Z24, Z27 \
	VPADDD        Z27, Z25, Z25 \
	VEXTRACTI64X4 $1, Z25, Y24 \
	VPADDD        Y24, Y25, Y25 \
	VEXTRACTI32X4 $1, Y25, X24 \
	VPADDD        X24, X25, x

#define IQXA_ROW(acc) \
	PREFETCHT1    (BX)(R12*1) \
	PREFETCHT1    64(BX)(R12*1) \
	PREFETCHT1    128(BX)(R12*1) \
	IQXM_SCALES(Z18, Z28) \
	IQXM_SCALES(Z19, Z29) \
	IQXA_HALF(0, Z28, Z26, acc) \
	IQXA_HALF(1, Z29, Z27, Z27) \
	VPADDD        Z27, acc, acc

`
