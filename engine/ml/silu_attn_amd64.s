// Hand-written: five distinct kernels, no unrolled copies; the table is one EXPC macro.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// SiLU and attention kernels. The exp in siluMul* is expf's algorithm
// (expf.go) step for step with the same float32 roundings and no FMA, so
// every lane is bit-identical to the plain-Go SiLUMul: results do not
// depend on the SIMD level or on where a chunk boundary falls.

// Constant table: 8 copies of each float32 (32 bytes per entry), at the
// offsets C_*.
#define C_SIGN 0
#define C_HI 32
#define C_LO 64
#define C_LOG2E 96
#define C_HALF 128
#define C_LN2HI 160
#define C_LN2LO 192
#define C_720 224
#define C_120 256
#define C_24 288
#define C_6 320
#define C_ONE 352
#define C_INF 384
#define C_BIAS 416

// EXPC(off, bits) writes the entry at off: 8 copies of the float32 bits.
#define EXPC(off, bits) \
	DATA expc<>+off+0(SB)/4, $bits \
	DATA expc<>+off+4(SB)/4, $bits \
	DATA expc<>+off+8(SB)/4, $bits \
	DATA expc<>+off+12(SB)/4, $bits \
	DATA expc<>+off+16(SB)/4, $bits \
	DATA expc<>+off+20(SB)/4, $bits \
	DATA expc<>+off+24(SB)/4, $bits \
	DATA expc<>+off+28(SB)/4, $bits

EXPC(C_SIGN, 0x80000000)
EXPC(C_HI, 0x42b17217)
EXPC(C_LO, 0xc2aeac4f)
EXPC(C_LOG2E, 0x3fb8aa3b)
EXPC(C_HALF, 0x3f000000)
EXPC(C_LN2HI, 0x3f317200)
EXPC(C_LN2LO, 0x35bfbe8e)
EXPC(C_720, 0x3ab60b61)
EXPC(C_120, 0x3c088889)
EXPC(C_24, 0x3d2aaaab)
EXPC(C_6, 0x3e2aaaab)
EXPC(C_ONE, 0x3f800000)
EXPC(C_INF, 0x7f800000)
EXPC(C_BIAS, 0x0000007f)
GLOBL expc<>(SB), RODATA|NOPTR, $448

// func siluMulAVX512(gate, up *float32, n16 int)
// gate[i] = gate[i] * (1/(1+expf(-gate[i]))) * up[i], n16 a multiple of 16.
TEXT ·siluMulAVX512(SB), NOSPLIT, $0-24
	MOVQ gate+0(FP), DI
	MOVQ up+8(FP), SI
	MOVQ n16+16(FP), CX
	SHLQ $2, CX
	VBROADCASTSS expc<>+C_SIGN(SB), Z16
	VBROADCASTSS expc<>+C_HI(SB), Z17
	VBROADCASTSS expc<>+C_LO(SB), Z18
	VBROADCASTSS expc<>+C_LOG2E(SB), Z19
	VBROADCASTSS expc<>+C_HALF(SB), Z20
	VBROADCASTSS expc<>+C_LN2HI(SB), Z21
	VBROADCASTSS expc<>+C_LN2LO(SB), Z22
	VBROADCASTSS expc<>+C_720(SB), Z23
	VBROADCASTSS expc<>+C_120(SB), Z24
	VBROADCASTSS expc<>+C_24(SB), Z25
	VBROADCASTSS expc<>+C_6(SB), Z26
	VBROADCASTSS expc<>+C_ONE(SB), Z27
	VBROADCASTSS expc<>+C_INF(SB), Z28
	VPXORD       Z29, Z29, Z29
	XORQ         AX, AX

sl512:
	CMPQ AX, CX
	JGE  sl512done
	VMOVUPS (DI)(AX*1), Z0   // g
	VXORPS  Z16, Z0, Z1      // x = -g
	VMAXPS  Z18, Z1, Z2
	VMINPS  Z17, Z2, Z2      // xc = clamp(x)
	VMULPS  Z19, Z2, Z3      // kf = xc*log2e
	VANDPS  Z16, Z3, Z4
	VORPS   Z20, Z4, Z4      // ±0.5 with kf's sign
	VADDPS  Z4, Z3, Z3
	VCVTTPS2DQ Z3, Z5        // k
	VCVTDQ2PS Z5, Z6         // fk
	VMULPS  Z21, Z6, Z7
	VSUBPS  Z7, Z2, Z8
	VMULPS  Z22, Z6, Z7
	VSUBPS  Z7, Z8, Z8       // r
	VMULPS  Z23, Z8, Z9
	VADDPS  Z24, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z25, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z26, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z20, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z27, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z27, Z9, Z9      // p
	VSCALEFPS Z6, Z9, Z9     // p * 2^k, one rounding
	VCMPPS  $0x1e, Z17, Z1, K2
	VMOVAPS Z28, K2, Z9      // x > hi: +Inf
	VCMPPS  $0x11, Z18, Z1, K3
	VMOVAPS Z29, K3, Z9      // x < lo: 0
	VADDPS  Z27, Z9, Z9      // 1 + e
	VDIVPS  Z9, Z27, Z9      // 1/(1+e)
	VMULPS  Z9, Z0, Z9       // g * ...
	VMULPS  (SI)(AX*1), Z9, Z9
	VMOVUPS Z9, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     sl512

sl512done:
	VZEROUPPER
	RET

// func siluMulAVX2(gate, up *float32, n8 int)
// As siluMulAVX512, 8 lanes; 2^k is applied as two exact halves.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-24
	MOVQ gate+0(FP), DI
	MOVQ up+8(FP), SI
	MOVQ n8+16(FP), CX
	SHLQ $2, CX
	LEAQ expc<>(SB), R8
	VMOVUPS C_SIGN(R8), Y15
	VMOVUPS C_ONE(R8), Y14
	VMOVUPS C_BIAS(R8), Y13
	XORQ    AX, AX

sl2:
	CMPQ AX, CX
	JGE  sl2done
	VMOVUPS (DI)(AX*1), Y0    // g
	VXORPS  Y15, Y0, Y1       // x = -g
	VMAXPS  C_LO(R8), Y1, Y2
	VMINPS  C_HI(R8), Y2, Y2  // xc
	VMULPS  C_LOG2E(R8), Y2, Y3
	VANDPS  Y15, Y3, Y4
	VORPS   C_HALF(R8), Y4, Y4
	VADDPS  Y4, Y3, Y3
	VCVTTPS2DQ Y3, Y5         // k
	VCVTDQ2PS Y5, Y6          // fk
	VMULPS  C_LN2HI(R8), Y6, Y7
	VSUBPS  Y7, Y2, Y8
	VMULPS  C_LN2LO(R8), Y6, Y7
	VSUBPS  Y7, Y8, Y8        // r
	VMULPS  C_720(R8), Y8, Y9
	VADDPS  C_120(R8), Y9, Y9
	VMULPS  Y8, Y9, Y9
	VADDPS  C_24(R8), Y9, Y9
	VMULPS  Y8, Y9, Y9
	VADDPS  C_6(R8), Y9, Y9
	VMULPS  Y8, Y9, Y9
	VADDPS  C_HALF(R8), Y9, Y9
	VMULPS  Y8, Y9, Y9
	VADDPS  Y14, Y9, Y9
	VMULPS  Y8, Y9, Y9
	VADDPS  Y14, Y9, Y9       // p
	VPSRAD  $1, Y5, Y10       // k1 = k>>1
	VPSUBD  Y10, Y5, Y11      // k2 = k-k1
	VPADDD  Y13, Y10, Y10
	VPSLLD  $23, Y10, Y10
	VPADDD  Y13, Y11, Y11
	VPSLLD  $23, Y11, Y11
	VMULPS  Y10, Y9, Y9       // exact
	VMULPS  Y11, Y9, Y9       // one rounding
	VCMPPS  $0x1e, C_HI(R8), Y1, Y12
	VBLENDVPS Y12, C_INF(R8), Y9, Y9
	VCMPPS  $0x11, C_LO(R8), Y1, Y12
	VANDNPS Y9, Y12, Y9
	VADDPS  Y14, Y9, Y9
	VDIVPS  Y9, Y14, Y9
	VMULPS  Y9, Y0, Y9
	VMULPS  (SI)(AX*1), Y9, Y9
	VMOVUPS Y9, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     sl2

sl2done:
	VZEROUPPER
	RET

// func expShiftAVX512(x *float32, n16 int, m float32)
// x[i] = expf(x[i] - m), bit-identical to expf, n16 a multiple of 16.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n16+8(FP), CX
	SHLQ $2, CX
	VBROADCASTSS m+16(FP), Z30
	VBROADCASTSS expc<>+C_SIGN(SB), Z16
	VBROADCASTSS expc<>+C_HI(SB), Z17
	VBROADCASTSS expc<>+C_LO(SB), Z18
	VBROADCASTSS expc<>+C_LOG2E(SB), Z19
	VBROADCASTSS expc<>+C_HALF(SB), Z20
	VBROADCASTSS expc<>+C_LN2HI(SB), Z21
	VBROADCASTSS expc<>+C_LN2LO(SB), Z22
	VBROADCASTSS expc<>+C_720(SB), Z23
	VBROADCASTSS expc<>+C_120(SB), Z24
	VBROADCASTSS expc<>+C_24(SB), Z25
	VBROADCASTSS expc<>+C_6(SB), Z26
	VBROADCASTSS expc<>+C_ONE(SB), Z27
	VBROADCASTSS expc<>+C_INF(SB), Z28
	VPXORD       Z29, Z29, Z29
	XORQ         AX, AX

ex512:
	CMPQ AX, CX
	JGE  ex512done
	VMOVUPS (DI)(AX*1), Z0
	VSUBPS  Z30, Z0, Z1      // x - m
	VCMPPS  $3, Z1, Z1, K4   // NaN lanes
	VMAXPS  Z18, Z1, Z2
	VMINPS  Z17, Z2, Z2      // xc = clamp(x)
	VMULPS  Z19, Z2, Z3      // kf = xc*log2e
	VANDPS  Z16, Z3, Z4
	VORPS   Z20, Z4, Z4      // ±0.5 with kf's sign
	VADDPS  Z4, Z3, Z3
	VCVTTPS2DQ Z3, Z5        // k
	VCVTDQ2PS Z5, Z6         // fk
	VMULPS  Z21, Z6, Z7
	VSUBPS  Z7, Z2, Z8
	VMULPS  Z22, Z6, Z7
	VSUBPS  Z7, Z8, Z8       // r
	VMULPS  Z23, Z8, Z9
	VADDPS  Z24, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z25, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z26, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z20, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z27, Z9, Z9
	VMULPS  Z8, Z9, Z9
	VADDPS  Z27, Z9, Z9      // p
	VSCALEFPS Z6, Z9, Z9     // p * 2^k, one rounding
	VCMPPS  $0x1e, Z17, Z1, K2
	VMOVAPS Z28, K2, Z9      // x > hi: +Inf
	VCMPPS  $0x11, Z18, Z1, K3
	VMOVAPS Z29, K3, Z9      // x < lo: 0
	VMOVAPS Z1, K4, Z9       // NaN stays NaN
	VMOVUPS Z9, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     ex512

ex512done:
	VZEROUPPER
	RET

// func attnScoresAVX512(dst, q, kv *float32, offs *int, n, d int, scale float32)
// dst[t] = dot(q[:d], kv[offs[t]:][:d]) * scale for t < n. Each dot is the
// same fixed sequence of operations whatever n is.
TEXT ·attnScoresAVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         d+40(FP), CX
	VBROADCASTSS scale+48(FP), Z31
	MOVQ         CX, R9
	SHRQ         $4, R9
	SHLQ         $6, R9
	TAILMASK
	MOVQ         R9, R13
	ANDQ         $-128, R13
	XORQ         DX, DX

as_t:
	CMPQ   DX, R11
	JGE    as_done
	LEAQ   2(DX), R12
	CMPQ   R12, R11
	JGE    as_nopf
	MOVQ   (R10)(R12*8), R12
	LEAQ   (R8)(R12*4), R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)
	PREFETCHT0 192(R12)

as_nopf:
	MOVQ   (R10)(DX*8), R12
	LEAQ   (R8)(R12*4), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ   AX, AX

as_2:
	CMPQ        AX, R13
	JGE         as_1
	VMOVUPS     (SI)(AX*1), Z2
	VMOVUPS     64(SI)(AX*1), Z3
	VFMADD231PS (R12)(AX*1), Z2, Z0
	VFMADD231PS 64(R12)(AX*1), Z3, Z1
	ADDQ        $128, AX
	JMP         as_2

as_1:
	CMPQ        AX, R9
	JGE         as_tail
	VMOVUPS     (SI)(AX*1), Z2
	VFMADD231PS (R12)(AX*1), Z2, Z0
	ADDQ        $64, AX

as_tail:
	KORTESTW    K1, K1
	JZ          as_red
	VMOVUPS.Z   (SI)(AX*1), K1, Z2
	VMOVUPS.Z   (R12)(AX*1), K1, Z3
	VFMADD231PS Z3, Z2, Z1

as_red:
	VADDPS Z1, Z0, Z0
	REDUCE1(Z0, Y0, X0)
	VMULSS X31, X0, X0
	VMOVSS X0, (DI)(DX*4)
	INCQ   DX
	JMP    as_t

as_done:
	VZEROUPPER
	RET

// func attnAccumAVX512(out, w, kv *float32, offs *int, n, d int)
// out[:d] += w[t] * kv[offs[t]:][:d] for t = 0..n-1 in order: every element
// is one FMA chain over t.
TEXT ·attnAccumAVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ kv+16(FP), R8
	MOVQ offs+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ d+40(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $6, R9
	TAILMASK
	MOVQ R9, R13
	ANDQ $-256, R13
	XORQ AX, AX

ac_4:
	CMPQ    AX, R13
	JGE     ac_1
	VMOVUPS (DI)(AX*1), Z0
	VMOVUPS 64(DI)(AX*1), Z1
	VMOVUPS 128(DI)(AX*1), Z2
	VMOVUPS 192(DI)(AX*1), Z3
	XORQ    DX, DX

ac_4t:
	CMPQ         DX, R11
	JGE          ac_4st
	LEAQ         2(DX), R12
	CMPQ         R12, R11
	JGE          ac_nopf
	MOVQ         (R10)(R12*8), R12
	LEAQ         (R8)(R12*4), R12
	PREFETCHT0   (R12)(AX*1)
	PREFETCHT0   64(R12)(AX*1)
	PREFETCHT0   128(R12)(AX*1)
	PREFETCHT0   192(R12)(AX*1)

ac_nopf:
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*4), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VFMADD231PS  (R12)(AX*1), Z4, Z0
	VFMADD231PS  64(R12)(AX*1), Z4, Z1
	VFMADD231PS  128(R12)(AX*1), Z4, Z2
	VFMADD231PS  192(R12)(AX*1), Z4, Z3
	INCQ         DX
	JMP          ac_4t

ac_4st:
	VMOVUPS Z0, (DI)(AX*1)
	VMOVUPS Z1, 64(DI)(AX*1)
	VMOVUPS Z2, 128(DI)(AX*1)
	VMOVUPS Z3, 192(DI)(AX*1)
	ADDQ    $256, AX
	JMP     ac_4

ac_1:
	CMPQ    AX, R9
	JGE     ac_tail
	VMOVUPS (DI)(AX*1), Z0
	XORQ    DX, DX

ac_1t:
	CMPQ         DX, R11
	JGE          ac_1st
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*4), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VFMADD231PS  (R12)(AX*1), Z4, Z0
	INCQ         DX
	JMP          ac_1t

ac_1st:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     ac_1

ac_tail:
	KORTESTW  K1, K1
	JZ        ac_done
	VMOVUPS.Z (DI)(AX*1), K1, Z0
	XORQ      DX, DX

ac_tt:
	CMPQ         DX, R11
	JGE          ac_tst
	MOVQ         (R10)(DX*8), R12
	LEAQ         (R8)(R12*4), R12
	VBROADCASTSS (SI)(DX*4), Z4
	VMOVUPS.Z    (R12)(AX*1), K1, Z5
	VFMADD231PS  Z5, Z4, Z0
	INCQ         DX
	JMP          ac_tt

ac_tst:
	VMOVUPS Z0, K1, (DI)(AX*1)

ac_done:
	VZEROUPPER
	RET
