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

// Pointers of pair k: BX = weight block, AX = activation block.
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
