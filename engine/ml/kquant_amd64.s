//go:build amd64 && !purego

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

// Horizontal sums of four 8-lane int32 vectors into the lanes of x0.
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

// func kqQ4KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
TEXT ·kqQ4KDot4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VXORPS X0, X0, X0

q4kLoop:
	PAIR0
	Q4K_PAIR(Y8, Y12)
	PAIR1
	Q4K_PAIR(Y9, Y13)
	PAIR2
	Q4K_PAIR(Y10, Y14)
	PAIR3
	Q4K_PAIR(Y11, Y15)

	K4_FINISH

	ADDQ $144, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q4kLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func kqQ5KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
TEXT ·kqQ5KDot4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VXORPS X0, X0, X0

q5kLoop:
	VMOVDQU kqMask10<>(SB), Y7
	PAIR0
	Q5K_PAIR(Y8, Y12)
	PAIR1
	Q5K_PAIR(Y9, Y13)
	PAIR2
	Q5K_PAIR(Y10, Y14)
	PAIR3
	Q5K_PAIR(Y11, Y15)

	K4_FINISH

	ADDQ $176, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q5kLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

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

// func kqQ6KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
TEXT ·kqQ6KDot4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqMask30<>(SB), Y12
	VMOVDQU kqSpread2<>(SB), Y13
	VXORPS X0, X0, X0

q6kLoop:
	PAIR0
	Q6K_PAIR(Y8)
	PAIR1
	Q6K_PAIR(Y9)
	PAIR2
	Q6K_PAIR(Y10)
	PAIR3
	Q6K_PAIR(Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, 208(BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, 208(BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, 208(BX), X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $210, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q6kLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

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

// func kqQ40Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// Q4_0 weights with Q8 activation blocks (40 bytes: f32 dx, int32 bias =
// -128*sum(q), 32 int8): per block s = sum(nibble*q) - 8*sum(q), exact,
// then acc + float32(s)*float32(d*dx), as dot32 in qdot.go.
TEXT ·kqQ40Dot4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqOnes16<>(SB), Y13
	VXORPS X0, X0, X0

q40Loop:
	PAIR0
	Q40_PAIR(Y8)
	PAIR1
	Q40_PAIR(Y9)
	PAIR2
	Q40_PAIR(Y10)
	PAIR3
	Q40_PAIR(Y11)
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	// s = sum(nibble*q) + bias/16.
	VMOVD   4(SI), X9
	LEAQ    (SI)(R9*1), AX
	VPINSRD $1, 4(AX), X9, X9
	LEAQ    (SI)(R9*2), AX
	VPINSRD $2, 4(AX), X9, X9
	LEAQ    (SI)(R11*1), AX
	VPINSRD $3, 4(AX), X9, X9
	VPSRAD  $4, X9, X9
	VPADDD  X9, X8, X8

	VPXOR   X4, X4, X4
	VPINSRW $0, (DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, (BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, (BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, (BX), X4, X4
	VCVTPH2PS X4, X6

	VMOVD   (SI), X7
	LEAQ    (SI)(R9*1), AX
	VPINSRD $1, (AX), X7, X7
	LEAQ    (SI)(R9*2), AX
	VPINSRD $2, (AX), X7, X7
	LEAQ    (SI)(R11*1), AX
	VPINSRD $3, (AX), X7, X7

	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $18, DI
	ADDQ $40, SI
	DECQ nb+32(FP)
	JNZ  q40Loop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func kqQ4KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One weight row against four activation rows (ws is ignored): the
// scales and the weight values are decoded once for the four.
TEXT ·kqQ4KRow4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	XORQ R8, R8
	XORQ R10, R10
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VXORPS X0, X0, X0

loopkqQ4KRow4AVX2:
	MOVQ DI, BX
	MOVQ SI, AX
	K4_SCALES(Y12)
	VPMOVZXBW X3, Y7
	VPMADDWD ACT_SUMS16(SI)(R9*1), Y7, Y13
	VPMADDWD ACT_SUMS16(SI)(R9*2), Y7, Y14
	VPMADDWD ACT_SUMS16(SI)(R11*1), Y7, Y15
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VMOVDQU (16+32*0)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPBROADCASTW (16+4*0)(SP), Y4
	VPBROADCASTW (18+4*0)(SP), Y5
	VPMADDUBSW (64*0)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*0+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*0)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*0+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*0)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*0+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*0)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*0+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (16+32*1)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPBROADCASTW (16+4*1)(SP), Y4
	VPBROADCASTW (18+4*1)(SP), Y5
	VPMADDUBSW (64*1)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*1+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*1)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*1+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*1)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*1+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*1)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*1+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (16+32*2)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPBROADCASTW (16+4*2)(SP), Y4
	VPBROADCASTW (18+4*2)(SP), Y5
	VPMADDUBSW (64*2)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*2+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*2)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*2+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*2)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*2+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*2)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*2+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (16+32*3)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPBROADCASTW (16+4*3)(SP), Y4
	VPBROADCASTW (18+4*3)(SP), Y5
	VPMADDUBSW (64*3)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*3+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*3)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*3+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*3)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*3+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*3)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*3+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	K4_FINISH

	ADDQ $144, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  loopkqQ4KRow4AVX2

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET


// func kqQ5KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One weight row against four activation rows (ws is ignored): the
// scales and the weight values are decoded once for the four.
TEXT ·kqQ5KRow4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	XORQ R8, R8
	XORQ R10, R10
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VXORPS X0, X0, X0

loopkqQ5KRow4AVX2:
	MOVQ DI, BX
	MOVQ SI, AX
	K4_SCALES(Y12)
	VPMOVZXBW X3, Y7
	VPMADDWD ACT_SUMS16(SI)(R9*1), Y7, Y13
	VPMADDWD ACT_SUMS16(SI)(R9*2), Y7, Y14
	VPMADDWD ACT_SUMS16(SI)(R11*1), Y7, Y15
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VMOVDQU (48+32*0)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPSLLW $4, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y3, Y3
	VPSLLW $3, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y2, Y2
	VPBROADCASTW (16+4*0)(SP), Y4
	VPBROADCASTW (18+4*0)(SP), Y5
	VPMADDUBSW (64*0)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*0+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*0)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*0+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*0)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*0+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*0)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*0+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (48+32*1)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPSLLW $2, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y3, Y3
	VPSLLW $1, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y2, Y2
	VPBROADCASTW (16+4*1)(SP), Y4
	VPBROADCASTW (18+4*1)(SP), Y5
	VPMADDUBSW (64*1)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*1+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*1)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*1+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*1)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*1+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*1)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*1+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (48+32*2)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPSRLW $0, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y3, Y3
	VPSRLW $1, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y2, Y2
	VPBROADCASTW (16+4*2)(SP), Y4
	VPBROADCASTW (18+4*2)(SP), Y5
	VPMADDUBSW (64*2)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*2+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*2)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*2+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*2)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*2+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*2)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*2+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	VMOVDQU (48+32*3)(BX), Y2
	VPAND Y1, Y2, Y3
	VPSRLW $4, Y2, Y2
	VPAND Y1, Y2, Y2
	VPSRLW $2, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y3, Y3
	VPSRLW $3, 16(BX), Y6
	VPAND kqMask10<>(SB), Y6, Y6
	VPOR Y6, Y2, Y2
	VPBROADCASTW (16+4*3)(SP), Y4
	VPBROADCASTW (18+4*3)(SP), Y5
	VPMADDUBSW (64*3)(SI), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*3+32)(SI), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y8, Y8
	VPMADDUBSW (64*3)(SI)(R9*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*3+32)(SI)(R9*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y9, Y9
	VPMADDUBSW (64*3)(SI)(R9*2), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*3+32)(SI)(R9*2), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y10, Y10
	VPMADDUBSW (64*3)(SI)(R11*1), Y3, Y6
	VPMADDWD Y4, Y6, Y6
	VPADDD Y6, Y11, Y11
	VPMADDUBSW (64*3+32)(SI)(R11*1), Y2, Y6
	VPMADDWD Y5, Y6, Y6
	VPADDD Y6, Y11, Y11
	K4_FINISH

	ADDQ $176, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  loopkqQ5KRow4AVX2

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET


// func kqQ6KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One Q6_K weight row against four activation rows (ws is ignored).
TEXT ·kqQ6KRow4AVX2(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	XORQ R8, R8
	XORQ R10, R10
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqMask30<>(SB), Y12
	VMOVDQU kqSpread2<>(SB), Y13
	VXORPS X0, X0, X0

loopkqQ6KRow4AVX2:
	VPMOVSXBW 192(DI), Y5
	VMOVDQU Y5, 0(SP)
	VPMADDWD ACT_SUMS16(SI), Y5, Y6
	VPSLLD $5, Y6, Y6
	VPXOR Y8, Y8, Y8
	VPSUBD Y6, Y8, Y8
	VPMADDWD ACT_SUMS16(SI)(R9*1), Y5, Y6
	VPSLLD $5, Y6, Y6
	VPXOR Y9, Y9, Y9
	VPSUBD Y6, Y9, Y9
	VPMADDWD ACT_SUMS16(SI)(R9*2), Y5, Y6
	VPSLLD $5, Y6, Y6
	VPXOR Y10, Y10, Y10
	VPSUBD Y6, Y10, Y10
	VPMADDWD ACT_SUMS16(SI)(R11*1), Y5, Y6
	VPSLLD $5, Y6, Y6
	VPXOR Y11, Y11, Y11
	VPSUBD Y6, Y11, Y11
	VMOVDQU (64*0)(DI), Y2
	VMOVDQU (64*0+32)(DI), Y3
	VMOVDQU (128+32*0)(DI), Y4
	VPAND Y1, Y2, Y5
	VPSLLW $4, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 0(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 0(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 0(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 0(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 0(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPAND Y1, Y3, Y5
	VPSLLW $2, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 4(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 32(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 32(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 32(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 32(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPSRLW $4, Y2, Y5
	VPAND Y1, Y5, Y5
	VPAND Y12, Y4, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 8(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 64(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 64(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 64(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 64(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPSRLW $4, Y3, Y5
	VPAND Y1, Y5, Y5
	VPSRLW $2, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 12(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 96(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 96(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 96(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 96(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VMOVDQU (64*1)(DI), Y2
	VMOVDQU (64*1+32)(DI), Y3
	VMOVDQU (128+32*1)(DI), Y4
	VPAND Y1, Y2, Y5
	VPSLLW $4, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 16(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 128(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 128(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 128(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 128(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPAND Y1, Y3, Y5
	VPSLLW $2, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 20(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 160(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 160(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 160(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 160(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPSRLW $4, Y2, Y5
	VPAND Y1, Y5, Y5
	VPAND Y12, Y4, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 24(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 192(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 192(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 192(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 192(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	VPSRLW $4, Y3, Y5
	VPAND Y1, Y5, Y5
	VPSRLW $2, Y4, Y7
	VPAND Y12, Y7, Y7
	VPOR Y7, Y5, Y5
	VPBROADCASTD 28(SP), Y6
	VPSHUFB Y13, Y6, Y6
	VPMADDUBSW 224(SI), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y8, Y8
	VPMADDUBSW 224(SI)(R9*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y9, Y9
	VPMADDUBSW 224(SI)(R9*2), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y10, Y10
	VPMADDUBSW 224(SI)(R11*1), Y5, Y7
	VPMADDWD Y6, Y7, Y7
	VPADDD Y7, Y11, Y11
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	VPSHUFLW $0, X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $210, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  loopkqQ6KRow4AVX2

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

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
// func kqQ5KDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)
TEXT ·kqQ5KDot4VNNI(SB), NOSPLIT, $32-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VXORPS X0, X0, X0

q5kVLoop:
	VMOVDQU kqMask10<>(SB), Y7
	PAIR0
	Q5K_PAIRV(Y8, Y12)
	PAIR1
	Q5K_PAIRV(Y9, Y13)
	PAIR2
	Q5K_PAIRV(Y10, Y14)
	PAIR3
	Q5K_PAIRV(Y11, Y15)

	K4_FINISH

	ADDQ $176, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q5kVLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

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

// func kqQ40Gemv8AVX2(w *byte, rb int, a *byte, nb int, out *float32)
//
// Eight Q4_0 weight rows (at w + k*rb) against one Q8 activation row, the
// eight outputs in the lanes of Y0, with dot32's arithmetic.
TEXT ·kqQ40Gemv8AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R12
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqOnes16<>(SB), Y13
	VXORPS Y0, Y0, Y0

q40g8Loop:
	VMOVDQU 8(SI), Y15
	Q40_ROW(2(DI), Y2)
	Q40_ROW(2(DI)(R8*1), Y3)
	Q40_ROW(2(DI)(R8*2), Y4)
	Q40_ROW(2(DI)(R10*1), Y5)
	Q40_ROW(2(R12), Y6)
	Q40_ROW(2(R12)(R8*1), Y7)
	Q40_ROW(2(R12)(R8*2), Y8)
	Q40_ROW(2(R12)(R10*1), Y9)
	VPHADDD Y3, Y2, Y2
	VPHADDD Y5, Y4, Y4
	VPHADDD Y7, Y6, Y6
	VPHADDD Y9, Y8, Y8
	VPHADDD Y4, Y2, Y2
	VPHADDD Y8, Y6, Y6
	VPERM2I128 $0x20, Y6, Y2, Y10
	VPERM2I128 $0x31, Y6, Y2, Y11
	VPADDD  Y11, Y10, Y10

	// s = sum(nibble*q) + bias/16.
	VPBROADCASTD 4(SI), Y11
	VPSRAD  $4, Y11, Y11
	VPADDD  Y11, Y10, Y10

	VPXOR   X12, X12, X12
	Q40_D(0, (DI))
	Q40_D(1, (DI)(R8*1))
	Q40_D(2, (DI)(R8*2))
	Q40_D(3, (DI)(R10*1))
	Q40_D(4, (R12))
	Q40_D(5, (R12)(R8*1))
	Q40_D(6, (R12)(R8*2))
	Q40_D(7, (R12)(R10*1))
	VCVTPH2PS X12, Y12
	VBROADCASTSS (SI), Y14
	VMULPS  Y14, Y12, Y12
	VCVTDQ2PS Y10, Y10
	VMULPS  Y12, Y10, Y10
	VADDPS  Y10, Y0, Y0

	ADDQ $18, DI
	ADDQ $18, R12
	ADDQ $40, SI
	DECQ CX
	JNZ  q40g8Loop

	MOVQ out+32(FP), DX
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func kqQ40Row4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One Q4_0 weight row against four Q8 activation rows (ws is ignored):
// the nibbles are unpacked once per block for the four.
TEXT ·kqQ40Row4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqOnes16<>(SB), Y13
	VXORPS X0, X0, X0

q40r4Loop:
	VMOVDQU      2(DI), X2
	VPSRLW       $4, X2, X3
	VINSERTI128  $1, X3, Y2, Y2
	VPAND        Y1, Y2, Y2
	VPMADDUBSW   8(SI), Y2, Y3
	VPMADDWD     Y13, Y3, Y8
	VPMADDUBSW   8(SI)(R9*1), Y2, Y3
	VPMADDWD     Y13, Y3, Y9
	VPMADDUBSW   8(SI)(R9*2), Y2, Y3
	VPMADDWD     Y13, Y3, Y10
	VPMADDUBSW   8(SI)(R11*1), Y2, Y3
	VPMADDWD     Y13, Y3, Y11
	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VMOVD   4(SI), X9
	VPINSRD $1, 4(SI)(R9*1), X9, X9
	VPINSRD $2, 4(SI)(R9*2), X9, X9
	VPINSRD $3, 4(SI)(R11*1), X9, X9
	VPSRAD  $4, X9, X9
	VPADDD  X9, X8, X8

	VPXOR    X4, X4, X4
	VPINSRW  $0, (DI), X4, X4
	VPSHUFLW $0, X4, X4
	VCVTPH2PS X4, X6

	VMOVD   (SI), X7
	VPINSRD $1, (SI)(R9*1), X7, X7
	VPINSRD $2, (SI)(R9*2), X7, X7
	VPINSRD $3, (SI)(R11*1), X7, X7

	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $18, DI
	ADDQ $40, SI
	DECQ nb+32(FP)
	JNZ  q40r4Loop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

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

// R12 = the in-kernel prefetch distance: kqPfDist bytes, or four rows
// (the next call's rows) when it is 0.
#define PF_DIST(label) \
	MOVQ  ·kqPfDist(SB), R12 \
	TESTQ R12, R12 \
	JNZ   label \
	MOVQ  R8, R12 \
	SHLQ  $2, R12 \
label:

// func kqQ4KDot4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// kqQ4KDot4AVX2 with AVX-512 VNNI for one activation row (as is
// ignored), on 512-bit vectors: each super-block's activation values are
// arranged once into the four orders of the rows' 64-byte nibble halves,
// so a row takes two loads and four multiply-add pairs, and the four
// rows' scales and mins are decoded and applied together, a row per
// 128-bit lane.
TEXT ·kqQ4KDot4VNNIZ(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	PF_DIST(q4kZpf)
	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	VPBROADCASTB kqMask0F<>(SB), Z24
	VMOVDQU64 kqScIdx0<>(SB), Z16
	VMOVDQU64 kqScIdx1<>(SB), Z17
	VMOVDQU64 kqScIdx2<>(SB), Z18
	VMOVDQU64 kqScIdx3<>(SB), Z19
	VXORPS X0, X0, X0

q4kZLoop:
	VMOVDQU64     (SI), Y20
	VINSERTI64X4  $1, 64(SI), Z20, Z20
	VMOVDQU64     32(SI), Y21
	VINSERTI64X4  $1, 96(SI), Z21, Z21
	VMOVDQU64     128(SI), Y22
	VINSERTI64X4  $1, 192(SI), Z22, Z22
	VMOVDQU64     160(SI), Y23
	VINSERTI64X4  $1, 224(SI), Z23, Z23
	K4_SCALES4
	PAIR0
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(0, Z8, Y8)
	PAIR1
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(1, Z9, Y9)
	PAIR2
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(2, Z10, Y10)
	PAIR3
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(3, Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	K4_MINS4
	VCVTPH2PS X4, Y4
	VEXTRACTF128 $1, Y4, X5
	VSHUFPS $0x88, X5, X4, X6
	VSHUFPS $0xDD, X5, X4, X5
	ACT_SCALES
	VMULPS  X7, X6, X6
	VMULPS  X7, X5, X5
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VCVTDQ2PS X12, X12
	VMULPS  X5, X12, X12
	VSUBPS  X12, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $144, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q4kZLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func kqQ4KDot8VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// kqQ4KDot4VNNIZ over eight rows (two groups of four, the second at
// w+4*ws) for one activation row: each super-block's activation vectors are
// loaded once for both groups. Each row's arithmetic is the four-row
// kernel's, so its result is the same bits.
TEXT ·kqQ4KDot8VNNIZ(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	PF_DIST(q4k8pf)
	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R13
	VPBROADCASTB kqMask0F<>(SB), Z24
	VMOVDQU64 kqScIdx0<>(SB), Z16
	VMOVDQU64 kqScIdx1<>(SB), Z17
	VMOVDQU64 kqScIdx2<>(SB), Z18
	VMOVDQU64 kqScIdx3<>(SB), Z19
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1

q4k8Loop:
	VMOVDQU64     (SI), Y20
	VINSERTI64X4  $1, 64(SI), Z20, Z20
	VMOVDQU64     32(SI), Y21
	VINSERTI64X4  $1, 96(SI), Z21, Z21
	VMOVDQU64     128(SI), Y22
	VINSERTI64X4  $1, 192(SI), Z22, Z22
	VMOVDQU64     160(SI), Y23
	VINSERTI64X4  $1, 224(SI), Z23, Z23
	K4_SCALES4
	PAIR0
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(0, Z8, Y8)
	PAIR1
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(1, Z9, Y9)
	PAIR2
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(2, Z10, Y10)
	PAIR3
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(3, Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	K4_MINS4
	VCVTPH2PS X4, Y4
	VEXTRACTF128 $1, Y4, X5
	VSHUFPS $0x88, X5, X4, X6
	VSHUFPS $0xDD, X5, X4, X5
	ACT_SCALES
	VMULPS  X7, X6, X6
	VMULPS  X7, X5, X5
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VCVTDQ2PS X12, X12
	VMULPS  X5, X12, X12
	VSUBPS  X12, X8, X8
	VADDPS  X8, X0, X0

	XCHGQ DI, R13
	K4_SCALES4
	PAIR0
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(0, Z8, Y8)
	PAIR1
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(1, Z9, Y9)
	PAIR2
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(2, Z10, Y10)
	PAIR3
	PREFETCHT1 (BX)(R12*1)
	PREFETCHT1 64(BX)(R12*1)
	PREFETCHT1 128(BX)(R12*1)
	Q4K_PAIR4(3, Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	K4_MINS4
	VCVTPH2PS X4, Y4
	VEXTRACTF128 $1, Y4, X5
	VSHUFPS $0x88, X5, X4, X6
	VSHUFPS $0xDD, X5, X4, X5
	ACT_SCALES
	VMULPS  X7, X6, X6
	VMULPS  X7, X5, X5
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VCVTDQ2PS X12, X12
	VMULPS  X5, X12, X12
	VSUBPS  X12, X8, X8
	VADDPS  X8, X1, X1

	XCHGQ DI, R13

	ADDQ $144, DI
	ADDQ $144, R13
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q4k8Loop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VMOVUPS X1, 16(DX)
	VZEROUPPER
	RET

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

// func kqQ6KDot4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// kqQ6KDot4AVX2 with AVX-512 VNNI for one activation row (as is
// ignored), on 512-bit vectors, the activation values arranged once per
// super-block into the order of the value vectors (see Q6K_PAIRZ).
TEXT ·kqQ6KDot4VNNIZ(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	PF_DIST(q6kZpf)
	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	VPBROADCASTB kqMask0F<>(SB), Z24
	VPBROADCASTB kqMask30<>(SB), Z25
	VMOVDQU64 kqSc6Idx0<>(SB), Z16
	VMOVDQU64 kqSc6Idx1<>(SB), Z17
	VMOVDQU64 kqSc6Idx2<>(SB), Z18
	VMOVDQU64 kqSc6Idx3<>(SB), Z19
	VXORPS X0, X0, X0

q6kZLoop:
	VMOVDQU64     (SI), Y20
	VINSERTI64X4  $1, 128(SI), Z20, Z20
	VMOVDQU64     32(SI), Y21
	VINSERTI64X4  $1, 160(SI), Z21, Z21
	VMOVDQU64     64(SI), Y22
	VINSERTI64X4  $1, 192(SI), Z22, Z22
	VMOVDQU64     96(SI), Y23
	VINSERTI64X4  $1, 224(SI), Z23, Z23
	PAIR0
	Q6K_PAIRZ(Z8, Y8)
	PAIR1
	Q6K_PAIRZ(Z9, Y9)
	PAIR2
	Q6K_PAIRZ(Z10, Y10)
	PAIR3
	Q6K_PAIRZ(Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, 208(BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, 208(BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, 208(BX), X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	ADDQ $210, DI
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q6kZLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func kqQ6KDot8VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// kqQ6KDot4VNNIZ over eight rows (two groups of four, the second at
// w+4*ws), the activation vectors loaded once per super-block for both;
// each row's arithmetic is the four-row kernel's (the same bits).
TEXT ·kqQ6KDot8VNNIZ(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	PF_DIST(q6k8pf)
	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R13
	VPBROADCASTB kqMask0F<>(SB), Z24
	VPBROADCASTB kqMask30<>(SB), Z25
	VMOVDQU64 kqSc6Idx0<>(SB), Z16
	VMOVDQU64 kqSc6Idx1<>(SB), Z17
	VMOVDQU64 kqSc6Idx2<>(SB), Z18
	VMOVDQU64 kqSc6Idx3<>(SB), Z19
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1

q6k8Loop:
	VMOVDQU64     (SI), Y20
	VINSERTI64X4  $1, 128(SI), Z20, Z20
	VMOVDQU64     32(SI), Y21
	VINSERTI64X4  $1, 160(SI), Z21, Z21
	VMOVDQU64     64(SI), Y22
	VINSERTI64X4  $1, 192(SI), Z22, Z22
	VMOVDQU64     96(SI), Y23
	VINSERTI64X4  $1, 224(SI), Z23, Z23
	PAIR0
	Q6K_PAIRZ(Z8, Y8)
	PAIR1
	Q6K_PAIRZ(Z9, Y9)
	PAIR2
	Q6K_PAIRZ(Z10, Y10)
	PAIR3
	Q6K_PAIRZ(Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, 208(BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, 208(BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, 208(BX), X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

	XCHGQ DI, R13
	PAIR0
	Q6K_PAIRZ(Z8, Y8)
	PAIR1
	Q6K_PAIRZ(Z9, Y9)
	PAIR2
	Q6K_PAIRZ(Z10, Y10)
	PAIR3
	Q6K_PAIRZ(Z11, Y11)

	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, 208(BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, 208(BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, 208(BX), X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X1, X1

	XCHGQ DI, R13

	ADDQ $210, DI
	ADDQ $210, R13
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q6k8Loop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VMOVUPS X1, 16(DX)
	VZEROUPPER
	RET
