package main

// Verbatim parts of kquant_amd64.s (see kquant.go): prose, DATA and
// #define macros, written once.

// kqIntro is the file's prose, data and the AVX2 macros shared by the Dot4 kernels.
const kqIntro = `//go:build amd64 && !purego

#include "textflag.h"

// K-quant dot products in integer arithmetic (see kquant.go for the
// arithmetic every kernel here reproduces bit for bit).
//
// Each kernel computes four outputs at once: output k (k < 4) is the dot
// product of the weight row at w + k*ws with the quantized activation row
// at a + k*as, over nb super-blocks. A matvec passes ws = row bytes and
// as = 0 (four weight rows, one activation row); a batched product passes
// ws = 0 and as = activation row bytes (one weight row, four activation
// rows). The four float accumulators live in the lanes of X0.

// Activation block layout (q8KActBlock bytes, see quantizeActQ8K): 256
// int8 values, the f32 scale, 16 int16 sums of 16 values.
#define ACT_BLOCK 292
#define ACT_SCALE 256
#define ACT_SUMS16 260

DATA kqMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqMask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqMask0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqMask0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqMask0F<>(SB), RODATA|NOPTR, $32

DATA kqMask10<>+0(SB)/8, $0x1010101010101010
DATA kqMask10<>+8(SB)/8, $0x1010101010101010
DATA kqMask10<>+16(SB)/8, $0x1010101010101010
DATA kqMask10<>+24(SB)/8, $0x1010101010101010
GLOBL kqMask10<>(SB), RODATA|NOPTR, $32

DATA kqMask30<>+0(SB)/8, $0x3030303030303030
DATA kqMask30<>+8(SB)/8, $0x3030303030303030
DATA kqMask30<>+16(SB)/8, $0x3030303030303030
DATA kqMask30<>+24(SB)/8, $0x3030303030303030
GLOBL kqMask30<>(SB), RODATA|NOPTR, $32

// Spreads the two int16 of a broadcast dword: word 0 over the low 128
// bits, word 1 over the high 128 bits.
DATA kqSpread2<>+0(SB)/8, $0x0100010001000100
DATA kqSpread2<>+8(SB)/8, $0x0100010001000100
DATA kqSpread2<>+16(SB)/8, $0x0302030203020302
DATA kqSpread2<>+24(SB)/8, $0x0302030203020302
GLOBL kqSpread2<>(SB), RODATA|NOPTR, $32

// Pointers of pair k: BX = weight block, AX = activation block. The pair
// macros prefetch the same block of the row four rows on (R8 = ws): in a
// matvec, the next call's rows, so DRAM reads overlap this call's work.
#define PAIR0 MOVQ DI, BX; MOVQ SI, AX
#define PAIR1 LEAQ (DI)(R8*1), BX; LEAQ (SI)(R9*1), AX
#define PAIR2 LEAQ (DI)(R8*2), BX; LEAQ (SI)(R9*2), AX
#define PAIR3 LEAQ (DI)(R10*1), BX; LEAQ (SI)(R11*1), AX

// One Q4_K super-block of one pair: integer sum of scale x dot into acc
// (8 int32 lanes), of min x sum into mins (8 int32 lanes: each min, doubled,
// times the two sums of 16 of its sub-block).
// Uses Y2..Y4 and the scales at frame bytes 16..31.
#define Q4K_CHUNK(c, acc) \
	VMOVDQU      (16+32*c)(BX), Y2 \
	VPAND        Y1, Y2, Y3 \
	VPSRLW       $4, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPMADDUBSW   (64*c)(AX), Y3, Y3 \
	VPBROADCASTW (16+4*c)(SP), Y4 \
	VPMADDWD     Y4, Y3, Y3 \
	VPADDD       Y3, acc, acc \
	VPMADDUBSW   (64*c+32)(AX), Y2, Y2 \
	VPBROADCASTW (18+4*c)(SP), Y4 \
	VPMADDWD     Y4, Y2, Y2 \
	VPADDD       Y2, acc, acc

// The 6-bit scales (as int16 at frame bytes 16..31) and mins of a Q4_K or
// Q5_K super-block; mins gets each min, doubled, times the two sums of 16
// of its sub-block (8 int32 lanes). The scales and mins are assembled in
// registers (a vector load spanning several narrower stores would stall
// store forwarding). Uses X2, X3, R12, R13, R14, CX, DX.
#define K4_SCALES(mins) \
	MOVL         4(BX), R12 \
	MOVL         8(BX), R13 \
	MOVL         12(BX), DX \
	MOVL         DX, CX \
	ANDL         $0x0f0f0f0f, CX \
	SHRL         $4, DX \
	ANDL         $0x0f0f0f0f, DX \
	MOVL         R12, R14 \
	SHRL         $2, R14 \
	ANDL         $0x30303030, R14 \
	ORL          R14, CX \
	MOVL         R13, R14 \
	SHRL         $2, R14 \
	ANDL         $0x30303030, R14 \
	ORL          R14, DX \
	ANDL         $0x3f3f3f3f, R12 \
	ANDL         $0x3f3f3f3f, R13 \
	SHLQ         $32, CX \
	ORQ          CX, R12 \
	SHLQ         $32, DX \
	ORQ          DX, R13 \
	VMOVQ        R12, X2 \
	VPMOVZXBW    X2, X2 \
	VMOVDQU      X2, 16(SP) \
	VMOVQ        R13, X3 \
	VPUNPCKLBW   X3, X3, X3 \
	VPMOVZXBW    X3, mins \
	VPMADDWD     ACT_SUMS16(AX), mins, mins

#define Q4K_PAIR(acc, mins) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	K4_SCALES(mins) \
	VPXOR        acc, acc, acc \
	Q4K_CHUNK(0, acc) \
	Q4K_CHUNK(1, acc) \
	Q4K_CHUNK(2, acc) \
	Q4K_CHUNK(3, acc)

// Q5_K: the Q4_K nibbles at offset 48, plus bit s of qh[l] (Y5) as bit 4
// of sub-block s's value l, moved there by shift op by n (Y7 = 0x10 bytes).
#define Q5K_BIT(dst, op, n) \
	op           $n, Y5, Y6 \
	VPAND        Y7, Y6, Y6 \
	VPOR         Y6, dst, dst

#define Q5K_CHUNK(c, oplo, nlo, ophi, nhi, acc) \
	VMOVDQU      (48+32*c)(BX), Y2 \
	VPAND        Y1, Y2, Y3 \
	VPSRLW       $4, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	Q5K_BIT(Y3, oplo, nlo) \
	Q5K_BIT(Y2, ophi, nhi) \
	VPMADDUBSW   (64*c)(AX), Y3, Y3 \
	VPBROADCASTW (16+4*c)(SP), Y4 \
	VPMADDWD     Y4, Y3, Y3 \
	VPADDD       Y3, acc, acc \
	VPMADDUBSW   (64*c+32)(AX), Y2, Y2 \
	VPBROADCASTW (18+4*c)(SP), Y4 \
	VPMADDWD     Y4, Y2, Y2 \
	VPADDD       Y2, acc, acc

#define Q5K_PAIR(acc, mins) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	K4_SCALES(mins) \
	VMOVDQU      16(BX), Y5 \
	VPXOR        acc, acc, acc \
	Q5K_CHUNK(0, VPSLLW, 4, VPSLLW, 3, acc) \
	Q5K_CHUNK(1, VPSLLW, 2, VPSLLW, 1, acc) \
	Q5K_CHUNK(2, VPSRLW, 0, VPSRLW, 1, acc) \
	Q5K_CHUNK(3, VPSRLW, 2, VPSRLW, 3, acc)

` + kqHsumActScales + `
// Sums the four pairs' int32 vectors and adds their super-block terms
// acc + (float32(d*dx)*isum - float32(dmin*dx)*msum) to X0.
#define K4_FINISH \
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9) \
	HSUM4x8(Y12, Y13, Y14, Y15, X12, X13) \
	VMOVD   (DI), X4 \
	LEAQ    (DI)(R8*1), BX \
	VPINSRD $1, (BX), X4, X4 \
	LEAQ    (DI)(R8*2), BX \
	VPINSRD $2, (BX), X4, X4 \
	LEAQ    (DI)(R10*1), BX \
	VPINSRD $3, (BX), X4, X4 \
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

`

// kqQ6KMacros is the Q6_K pair macros of kqQ6KDot4AVX2.
const kqQ6KMacros = `
// One Q6_K half (128 values) of one pair.
#define Q6K_PART(src, off, acc) \
	VPMADDUBSW   off(AX), src, src \
	VPBROADCASTD ((off)/8)(SP), Y6 \
	VPSHUFB      Y13, Y6, Y6 \
	VPMADDWD     Y6, src, src \
	VPADDD       src, acc, acc

#define Q6K_HALF(n, acc) \
	VMOVDQU      (64*n)(BX), Y2 \
	VMOVDQU      (64*n+32)(BX), Y3 \
	VMOVDQU      (128+32*n)(BX), Y4 \
	VPAND        Y1, Y2, Y5 \
	VPSLLW       $4, Y4, Y6 \
	VPAND        Y12, Y6, Y6 \
	VPOR         Y6, Y5, Y5 \
	Q6K_PART(Y5, 128*n, acc) \
	VPAND        Y1, Y3, Y5 \
	VPSLLW       $2, Y4, Y6 \
	VPAND        Y12, Y6, Y6 \
	VPOR         Y6, Y5, Y5 \
	Q6K_PART(Y5, 128*n+32, acc) \
	VPSRLW       $4, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPAND        Y12, Y4, Y6 \
	VPOR         Y6, Y2, Y2 \
	Q6K_PART(Y2, 128*n+64, acc) \
	VPSRLW       $4, Y3, Y3 \
	VPAND        Y1, Y3, Y3 \
	VPSRLW       $2, Y4, Y4 \
	VPAND        Y12, Y4, Y4 \
	VPOR         Y4, Y3, Y3 \
	Q6K_PART(Y3, 128*n+96, acc)

// The sub-block scales as int16 in the frame; acc starts at
// -32 * sum_j sc[j] * sum16[j].
#define Q6K_PAIR(acc) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	PREFETCHT0   192(BX)(R8*4) \
	VPMOVSXBW    192(BX), Y5 \
	VMOVDQU      Y5, 0(SP) \
	VPMADDWD     ACT_SUMS16(AX), Y5, Y5 \
	VPSLLD       $5, Y5, Y5 \
	VPXOR        acc, acc, acc \
	VPSUBD       Y5, acc, acc \
	Q6K_HALF(0, acc) \
	Q6K_HALF(1, acc)

`

// kqQ40Macros is the Q4_0 constants and pair macro.
const kqQ40Macros = `
DATA kqOnes16<>+0(SB)/8, $0x0001000100010001
DATA kqOnes16<>+8(SB)/8, $0x0001000100010001
DATA kqOnes16<>+16(SB)/8, $0x0001000100010001
DATA kqOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL kqOnes16<>(SB), RODATA|NOPTR, $32

// One Q4_0 block of one pair: the 32 nibbles (low nibbles values 0..15,
// high 16..31) times the Q8 activation values, summed into 8 int32 lanes.
#define Q40_PAIR(acc) \
	VMOVDQU      2(BX), X2 \
	VPSRLW       $4, X2, X3 \
	VINSERTI128  $1, X3, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	VPMADDUBSW   8(AX), Y2, Y2 \
	VPMADDWD     Y13, Y2, acc

`

// kqVNNIMacros is the VNNI variants of the Q5_K macros.
const kqVNNIMacros = `
// VNNI variants of the matvec kernels.

#define Q5K_CHUNKV(c, oplo, nlo, ophi, nhi, acc) \
	VMOVDQU      (48+32*c)(BX), Y2 \
	VPAND        Y1, Y2, Y3 \
	VPSRLW       $4, Y2, Y2 \
	VPAND        Y1, Y2, Y2 \
	Q5K_BIT(Y3, oplo, nlo) \
	Q5K_BIT(Y2, ophi, nhi) \
	VPMADDUBSW   (64*c)(AX), Y3, Y3 \
	VPBROADCASTW (16+4*c)(SP), Y4 \
	VPDPWSSD     Y4, Y3, acc \
	VPMADDUBSW   (64*c+32)(AX), Y2, Y2 \
	VPBROADCASTW (18+4*c)(SP), Y4 \
	VPDPWSSD     Y4, Y2, acc

#define Q5K_PAIRV(acc, mins) \
	PREFETCHT0   (BX)(R8*4) \
	PREFETCHT0   64(BX)(R8*4) \
	PREFETCHT0   128(BX)(R8*4) \
	K4_SCALES(mins) \
	VMOVDQU      16(BX), Y5 \
	VPXOR        acc, acc, acc \
	Q5K_CHUNKV(0, VPSLLW, 4, VPSLLW, 3, acc) \
	Q5K_CHUNKV(1, VPSLLW, 2, VPSLLW, 1, acc) \
	Q5K_CHUNKV(2, VPSRLW, 0, VPSRLW, 1, acc) \
	Q5K_CHUNKV(3, VPSRLW, 2, VPSRLW, 3, acc)

// As kqQ5KDot4AVX2, with AVX-512 VNNI VPDPWSSD fusing the scale multiply-add.
`

// kqQ40RowMacros is the 8-row Q4_0 macros.
const kqQ40RowMacros = `
// One Q4_0 row of the 8-row matvec: 8 int32 lanes of nibble x q sums.
#define Q40_ROW(src, dst) \
	VMOVDQU      src, X10 \
	VPSRLW       $4, X10, X11 \
	VINSERTI128  $1, X11, Y10, Y10 \
	VPAND        Y1, Y10, Y10 \
	VPMADDUBSW   Y15, Y10, Y10 \
	VPMADDWD     Y13, Y10, dst

#define Q40_D(k, src) \
	VPINSRW      $k, src, X12, X12

`

// kqZMacros is the AVX-512 Q4_K constants and macros of the VNNIZ kernels.
const kqZMacros = `
// VPSHUFB indices spreading the eight 6-bit scales of a Q4_K super-block
// (bytes of a broadcast qword) over the words of one ZMM of values: slot
// s holds sub-blocks a (low 256 bits) and b (high 256 bits).
#define SCALE_IDX(name, a, b) \
	DATA name<>+0(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+8(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+16(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+24(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+32(SB)/8, $(0x8000800080008000+b*0x0001000100010001) \
	DATA name<>+40(SB)/8, $(0x8000800080008000+b*0x0001000100010001) \
	DATA name<>+48(SB)/8, $(0x8000800080008000+b*0x0001000100010001) \
	DATA name<>+56(SB)/8, $(0x8000800080008000+b*0x0001000100010001) \
	GLOBL name<>(SB), RODATA|NOPTR, $64

SCALE_IDX(kqScIdx0, 0, 2)
SCALE_IDX(kqScIdx1, 1, 3)
SCALE_IDX(kqScIdx2, 4, 6)
SCALE_IDX(kqScIdx3, 5, 7)

// One 64-byte half of a row's nibbles (two of its 32-byte chunks): the
// low nibbles against activation vector alo, the high against ahi, each
// product pair times its sub-block's scale (spread by ilo, ihi) into acc.
#define Q4K_HALFZ(off, alo, ahi, ilo, ihi, acc) \
	VMOVDQU64    off(BX), Z27 \
	VPSRLW       $4, Z27, Z28 \
	VPANDD       Z24, Z27, Z27 \
	VPANDD       Z24, Z28, Z28 \
	VPMADDUBSW   alo, Z27, Z27 \
	VPSHUFB      ilo, Z26, Z29 \
	VPDPWSSD     Z29, Z27, acc \
	VPMADDUBSW   ahi, Z28, Z28 \
	VPSHUFB      ihi, Z26, Z30 \
	VPDPWSSD     Z30, Z28, acc

// Per-lane constants of the Q4_K scale decoding over four rows' 16-byte
// headers (one row per 128-bit lane; see K4_SCALES4).
#define LANE4(name, q0, q1) \
	DATA name<>+0(SB)/8, $q0 \
	DATA name<>+8(SB)/8, $q1 \
	DATA name<>+16(SB)/8, $q0 \
	DATA name<>+24(SB)/8, $q1 \
	DATA name<>+32(SB)/8, $q0 \
	DATA name<>+40(SB)/8, $q1 \
	DATA name<>+48(SB)/8, $q0 \
	DATA name<>+56(SB)/8, $q1 \
	GLOBL name<>(SB), RODATA|NOPTR, $64

LANE4(kqK4Shv, 0, 0x0000000400000000)
LANE4(kqK4M1, 0x0f0f0f0f3f3f3f3f, 0x0f0f0f0f3f3f3f3f)
LANE4(kqK4M2, 0x3030303000000000, 0x3030303000000000)
LANE4(kqK4MinLo, 0x8009800980088008, 0x800b800b800a800a)
LANE4(kqK4MinHi, 0x800d800d800c800c, 0x800f800f800e800e)

// Dword 0 of each 128-bit lane into dwords 0..3.
DATA kqK4Perm<>+0(SB)/8, $0x0000000400000000
DATA kqK4Perm<>+8(SB)/8, $0x0000000c00000008
DATA kqK4Perm<>+16(SB)/8, $0
DATA kqK4Perm<>+24(SB)/8, $0
DATA kqK4Perm<>+32(SB)/8, $0
DATA kqK4Perm<>+40(SB)/8, $0
DATA kqK4Perm<>+48(SB)/8, $0
DATA kqK4Perm<>+56(SB)/8, $0
GLOBL kqK4Perm<>(SB), RODATA|NOPTR, $64

// The 6-bit scales and mins of the four rows' super-blocks at once: Z25
// gets the rows' first 16 bytes (d, dmin, the 12 scale bytes), Z31 per
// lane the bytes sc0..sc7, m0..m7 (K4_SCALES's arithmetic on the dwords
// s0, s1, s2 of the scale bytes: sc = s0&0x3f, (s2&0x0f)|((s0>>2)&0x30);
// m = s1&0x3f, ((s2>>4)&0x0f)|((s1>>2)&0x30)). Uses Z28, Z29.
#define K4_SCALES4 \
	VMOVDQU32    (DI), X25 \
	VINSERTI32X4 $1, (DI)(R8*1), Z25, Z25 \
	VINSERTI32X4 $2, (DI)(R8*2), Z25, Z25 \
	VINSERTI32X4 $3, (DI)(R10*1), Z25, Z25 \
	VPSHUFD      $0xed, Z25, Z28 \
	VPSRLVD      kqK4Shv<>(SB), Z28, Z28 \
	VPSHUFD      $0xa5, Z25, Z31 \
	VPSRLD       $2, Z31, Z31 \
	VPANDD       kqK4M2<>(SB), Z31, Z31 \
	VPTERNLOGD   $0xf8, kqK4M1<>(SB), Z28, Z31

// Row k's scale bytes broadcast into Z26.
#define K4_ROWSC(k) \
	VSHUFI32X4   $(k*0x55), Z31, Z31, Z26

// X12 gets each row's sum of min x the two sums of 16 of its sub-block,
// X4 the rows' (d, dmin) pairs. Uses Z27..Z29.
#define K4_MINS4 \
	VPSHUFB         kqK4MinLo<>(SB), Z31, Z27 \
	VPSHUFB         kqK4MinHi<>(SB), Z31, Z28 \
	VBROADCASTI32X4 ACT_SUMS16(SI), Z29 \
	VPMADDWD        Z29, Z27, Z27 \
	VBROADCASTI32X4 (ACT_SUMS16+16)(SI), Z29 \
	VPDPWSSD        Z29, Z28, Z27 \
	VPSHUFD         $0x4e, Z27, Z28 \
	VPADDD          Z28, Z27, Z27 \
	VPSHUFD         $0xb1, Z27, Z28 \
	VPADDD          Z28, Z27, Z27 \
	VMOVDQU32       kqK4Perm<>(SB), Z28 \
	VPERMD          Z27, Z28, Z12 \
	VPERMD          Z25, Z28, Z4

// The integer sum of scale x dot of pair k in the 8 int32 lanes of acc's
// low half as the 256-bit kernels leave it (an int32 sum's order does not
// change its value), the scales from K4_SCALES4.
#define Q4K_PAIR4(k, zacc, acc) \
	K4_ROWSC(k) \
	VPXORD       zacc, zacc, zacc \
	Q4K_HALFZ(16, Z20, Z21, Z16, Z17, zacc) \
	Q4K_HALFZ(80, Z22, Z23, Z18, Z19, zacc) \
	VEXTRACTI64X4 $1, zacc, Y2 \
	VPADDD       Y2, acc, acc

` + kqPfDistMacro

// kqPfDistMacro is PF_DIST (also in iq4xs_amd64.s).
const kqPfDistMacro = `// R12 = the in-kernel prefetch distance: kqPfDist bytes (four rows, the
// next call's rows, when it is 0), or kqPfRows rows where that is
// farther: the same blocks of the rows a call or two on, which long rows
// need (a fixed distance of a few rows' bytes lands in rows the kernel is
// already reading). Uses R11.
#define PF_DIST(label) \
	MOVQ    ·kqPfDist(SB), R12 \
	TESTQ   R12, R12 \
	JNZ     label \
	MOVQ    R8, R12 \
	SHLQ    $2, R12 \
label: \
	MOVQ    ·kqPfRows(SB), R11 \
	IMULQ   R8, R11 \
	CMPQ    R11, R12 \
	CMOVQGT R11, R12

`

// kqZ6Macros is the AVX-512 Q6_K constants and macros.
const kqZ6Macros = `
// VPSHUFB indices for Q6_K's 16-value sub-block scales: vector k of a
// super-block holds sub-blocks 2k, 2k+1, 8+2k, 9+2k in its 128-bit lanes;
// lanes 0, 1 of the source hold the scales 0..7 as words, lanes 2, 3 the
// scales 8..15, so lanes 0 and 2 take word 2k, lanes 1 and 3 word 2k+1.
#define SC6_IDX(name, w0, w1) \
	DATA name<>+0(SB)/8, $(w0*0x0001000100010001) \
	DATA name<>+8(SB)/8, $(w0*0x0001000100010001) \
	DATA name<>+16(SB)/8, $(w1*0x0001000100010001) \
	DATA name<>+24(SB)/8, $(w1*0x0001000100010001) \
	DATA name<>+32(SB)/8, $(w0*0x0001000100010001) \
	DATA name<>+40(SB)/8, $(w0*0x0001000100010001) \
	DATA name<>+48(SB)/8, $(w1*0x0001000100010001) \
	DATA name<>+56(SB)/8, $(w1*0x0001000100010001) \
	GLOBL name<>(SB), RODATA|NOPTR, $64

SC6_IDX(kqSc6Idx0, 0x0100, 0x0302)
SC6_IDX(kqSc6Idx1, 0x0504, 0x0706)
SC6_IDX(kqSc6Idx2, 0x0908, 0x0b0a)
SC6_IDX(kqSc6Idx3, 0x0d0c, 0x0f0e)

// One Q6_K value vector: the 4-bit part lo (masked here) or'ed with the
// two high bits already at bits 4..5 in hi, times activation vector act,
// times the sub-block scales (spread by idx) into acc. Uses Z31.
#define Q6K_VECZ(lo, hi, act, idx, acc) \
	VPTERNLOGD   $0xf8, Z24, lo, hi \
	VPMADDUBSW   act, hi, hi \
	VPSHUFB      idx, Z26, Z31 \
	VPDPWSSD     Z31, hi, acc

// The integer sum of one Q6_K pair in the 8 int32 lanes of acc (as the
// 256-bit kernels leave it). Vector 0 pairs ql[0:32] with ql[64:96] (the
// same value positions of the two 128-value halves, whose qh bytes are
// qh[0:32] and qh[32:64]: one 64-byte load), vector 1 ql[32:64] with
// ql[96:128]; their high nibbles make vectors 2 and 3.
#define Q6K_PAIRZ(zacc, acc) \
	PREFETCHT1    (BX)(R12*1) \
	PREFETCHT1    64(BX)(R12*1) \
	PREFETCHT1    128(BX)(R12*1) \
	PREFETCHT1    192(BX)(R12*1) \
	VPMOVSXBW     192(BX), Y5 \
	VPMADDWD      ACT_SUMS16(AX), Y5, Y6 \
	VPSLLD        $5, Y6, Y6 \
	VPXORD        zacc, zacc, zacc \
	VSHUFI64X2    $0x50, Z5, Z5, Z26 \
	VMOVDQU64     (BX), Y27 \
	VINSERTI64X4  $1, 64(BX), Z27, Z27 \
	VMOVDQU64     32(BX), Y28 \
	VINSERTI64X4  $1, 96(BX), Z28, Z28 \
	VMOVDQU64     128(BX), Z29 \
	VPSLLW        $4, Z29, Z30 \
	VPANDD        Z25, Z30, Z30 \
	Q6K_VECZ(Z27, Z30, Z20, Z16, zacc) \
	VPSLLW        $2, Z29, Z30 \
	VPANDD        Z25, Z30, Z30 \
	Q6K_VECZ(Z28, Z30, Z21, Z17, zacc) \
	VPSRLW        $4, Z27, Z27 \
	VPANDD        Z25, Z29, Z30 \
	Q6K_VECZ(Z27, Z30, Z22, Z18, zacc) \
	VPSRLW        $4, Z28, Z28 \
	VPSRLW        $2, Z29, Z30 \
	VPANDD        Z25, Z30, Z30 \
	Q6K_VECZ(Z28, Z30, Z23, Z19, zacc) \
	VEXTRACTI64X4 $1, zacc, Y2 \
	VPADDD        Y2, acc, acc \
	VPSUBD        Y6, acc, acc

`

// kqHsumActScales is the horizontal sum and activation-scale gather that
// kquant_amd64.s and kquant_low_amd64.s both use.
const kqHsumActScales = `// Horizontal sums of four 8-lane int32 vectors into the lanes of x0.
#define HSUM4x8(y0, y1, y2, y3, x0, x1) \
	VPHADDD      y1, y0, y0 \
	VPHADDD      y3, y2, y2 \
	VPHADDD      y2, y0, y0 \
	VEXTRACTI128 $1, y0, x1 \
	VPADDD       x1, x0, x0

// The four activation scales into X7.
#define ACT_SCALES \
	VMOVD        ACT_SCALE(SI), X7 \
	LEAQ         (SI)(R9*1), AX \
	VPINSRD      $1, ACT_SCALE(AX), X7, X7 \
	LEAQ         (SI)(R9*2), AX \
	VPINSRD      $2, ACT_SCALE(AX), X7, X7 \
	LEAQ         (SI)(R11*1), AX \
	VPINSRD      $3, ACT_SCALE(AX), X7, X7
`
