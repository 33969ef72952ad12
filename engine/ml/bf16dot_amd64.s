// Hand-written: the BF16 weight products (bf16dot.go), with VDPBF16PS
// where the CPU has AVX512_BF16 and an emulation of it on AVX-512F, both
// giving dotBF16Ref's bits.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"
#include "bf16dot_amd64.h"

// K1 = mask of the low (CX & 31) 16-bit lanes. Clobbers CX, BX.
#define BF16TAILMASK \
	ANDQ  $31, CX \
	MOVL  $1, BX  \
	SHLL  CX, BX  \
	DECL  BX      \
	KMOVD BX, K1

// Z0 (16 f32 as bits) rounded to bf16 as VCVTNEPS2BF16 does, in Y7, with
// Z10-Z15 holding 0x7fff, 1, 0x7f800000, 0x7fffffff, 0x8000 and 0x40.
// Clobbers Z1-Z6, K2, K3.
#define BF16ROUNDEMU \
	VPSRLD     $16, Z0, Z1      \
	VPANDD     Z11, Z1, Z2      \
	VPADDD     Z10, Z2, Z2      \
	VPADDD     Z0, Z2, Z2       \
	VPSRLD     $16, Z2, Z2      \
	VPANDD     Z14, Z1, Z3      \
	VPTESTMD   Z12, Z0, K2      \
	VPBLENDMD  Z2, Z3, K2, Z4   \
	VPANDD     Z13, Z0, Z5      \
	VPCMPUD    $6, Z12, Z5, K3  \
	VPORD      Z15, Z1, Z6      \
	VPBLENDMD  Z6, Z4, K3, Z4   \
	VPMOVDW    Z4, Y7

// MXCSR with DAZ (bit 6) and FTZ (bit 15) set in new-8(SP), the caller's
// in old-4(SP) (Go code runs with both clear; an assembly function is not
// preempted asynchronously, so no Go code runs under the new one). Every
// BF16 kernel runs so, reductions included (dotBF16Ref flushes the lane
// sums too); VDPBF16PS itself ignores MXCSR. Clobbers AX.
#define MXCSR_DAZFTZ \
	STMXCSR old-4(SP)     \
	MOVL    old-4(SP), AX \
	ORL     $0x8040, AX   \
	MOVL    AX, new-8(SP) \
	LDMXCSR new-8(SP)

// The emulated VDPBF16PS of raw bf16 vectors x (in xr) and w (in wr) into
// acc, Z7 holding 0xFFFF0000 in every lane: the odd elements (high halves)
// first, then the even ones shifted up, each an FMA (DAZ/FTZ by MXCSR).
#define EMUDP(xr, wr, acc) \
	VPANDD      Z7, xr, Z2   \
	VPANDD      Z7, wr, Z3   \
	VPSLLD      $16, xr, xr  \
	VPSLLD      $16, wr, wr  \
	VFMADD231PS Z3, Z2, acc  \
	VFMADD231PS wr, xr, acc
// The arguments of bf16DotRows and bf16DotRowsEmu: x in SI, w in DI, ws in
// R8, whole-chunk bytes in R9, whole four-chunk bytes in R10, the tail mask
// in K1, dst in DX, nw in R11, the prefetch distance in R12.
#define BF16ROWSARGS \
	MOVQ x+0(FP), SI \
	MOVQ w+8(FP), DI \
	MOVQ ws+16(FP), R8 \
	MOVQ k+24(FP), CX \
	MOVQ CX, R9 \
	SHRQ $5, R9 \
	SHLQ $6, R9 \
	MOVQ R9, R10 \
	ANDQ $-256, R10 \
	BF16TAILMASK \
	MOVQ dst+32(FP), DX \
	MOVQ nw+40(FP), R11 \
	MOVQ ·f16PfBytes(SB), R12

// The arguments of bf16Dot4x4 and bf16Dot4x4Emu: the four activation rows
// in SI, BX, R12, R13, w in DI, ws in R8, dst in DX, ds in bytes in CX, nw
// in R11.
#define BF16X4ARGS \
	MOVQ x+0(FP), SI \
	MOVQ xs+8(FP), AX \
	LEAQ (SI)(AX*1), BX \
	LEAQ (SI)(AX*2), R12 \
	LEAQ (BX)(AX*2), R13 \
	MOVQ w+16(FP), DI \
	MOVQ ws+24(FP), R8 \
	MOVQ dst+40(FP), DX \
	MOVQ ds+48(FP), CX \
	SHLQ $2, CX \
	MOVQ nw+56(FP), R11

// A group of four weight rows starts: rows 1-3 in R14, R15, R10, the 16
// accumulators Z8-Z23 cleared, the offset AX at 0.
#define BF16X4START \
	LEAQ (DI)(R8*1), R14 \
	LEAQ (DI)(R8*2), R15 \
	LEAQ (R14)(R8*2), R10 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z23, Z23, Z23 \
	XORQ AX, AX

// The 16 outputs of a group reduced (REDUCE1's order) and stored as four
// rows of four, dst and w advanced to the next group.
#define BF16X4STORE \
	VMOVAPS Z16, Z0 \
	VMOVAPS Z17, Z1 \
	VMOVAPS Z18, Z2 \
	VMOVAPS Z19, Z3 \
	VMOVAPS Z20, Z4 \
	VMOVAPS Z21, Z5 \
	VMOVAPS Z22, Z6 \
	VMOVAPS Z23, Z7 \
	REDUCE4(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, X8, X9, X10, X11) \
	VMOVUPS X8, (DX) \
	REDUCE4(Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15, X12, X13, X14, X15) \
	VMOVUPS X12, (DX)(CX*1) \
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3) \
	VMOVUPS X0, (DX)(CX*2) \
	LEAQ (DX)(CX*2), R10 \
	REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7) \
	VMOVUPS X4, (R10)(CX*1) \
	ADDQ $16, DX \
	LEAQ (DI)(R8*4), DI \
	SUBQ $4, R11

// func bf16DotRows(x *byte, w *byte, ws int, k int, dst *float32, nw int)
// One weight row at a time, in address order (one stream, as gemvF16x1),
// one 16-lane chain per row over the 32-value chunks, the tail masked.
// Lines are prefetched f16PfBytes ahead (across rows: contiguous or padded,
// and a prefetch past the end does not fault).
TEXT ·bf16DotRows(SB), NOSPLIT, $8-48
	MXCSR_DAZFTZ
	BF16ROWSARGS
bf16DotRowsrow:
	TESTQ R11, R11
	JZ    bf16DotRowsdone
	LEAQ  (DI)(R12*1), R13
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX
bf16DotRowsloop4:
	CMPQ AX, R10
	JGE  bf16DotRowsloop1
	PREFETCHT1 (R13)(AX*1)
	PREFETCHT1 64(R13)(AX*1)
	PREFETCHT1 128(R13)(AX*1)
	PREFETCHT1 192(R13)(AX*1)
	VMOVDQU32 0(DI)(AX*1), Z4
	VMOVDQU32 64(DI)(AX*1), Z5
	VMOVDQU32 128(DI)(AX*1), Z6
	VMOVDQU32 192(DI)(AX*1), Z7
	VMOVDQU32 0(SI)(AX*1), Z8
	VMOVDQU32 64(SI)(AX*1), Z9
	VMOVDQU32 128(SI)(AX*1), Z10
	VMOVDQU32 192(SI)(AX*1), Z11
	DPBF_Z4_Z8_Z0
	DPBF_Z5_Z9_Z0
	DPBF_Z6_Z10_Z0
	DPBF_Z7_Z11_Z0
	ADDQ $256, AX
	JMP  bf16DotRowsloop4

bf16DotRowsloop1:
	CMPQ AX, R9
	JGE  bf16DotRowstail
	VMOVDQU32 (DI)(AX*1), Z4
	VMOVDQU32 (SI)(AX*1), Z8
	DPBF_Z4_Z8_Z0
	ADDQ $64, AX
	JMP  bf16DotRowsloop1

bf16DotRowstail:
	KORTESTD K1, K1
	JZ       bf16DotRowsreduce
	VMOVDQU16.Z (DI)(AX*1), K1, Z4
	VMOVDQU16.Z (SI)(AX*1), K1, Z8
	DPBF_Z4_Z8_Z0

bf16DotRowsreduce:
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	ADDQ   R8, DI
	DECQ   R11
	JMP    bf16DotRowsrow

bf16DotRowsdone:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET

// func bf16DotRowsEmu(x *byte, w *byte, ws int, k int, dst *float32, nw int)
// One weight row at a time, in address order (one stream, as gemvF16x1),
// one 16-lane chain per row over the 32-value chunks, the tail masked.
// Lines are prefetched f16PfBytes ahead (across rows: contiguous or padded,
// and a prefetch past the end does not fault).
TEXT ·bf16DotRowsEmu(SB), NOSPLIT, $8-48
	MXCSR_DAZFTZ
	BF16ROWSARGS
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z7
bf16DotRowsEmurow:
	TESTQ R11, R11
	JZ    bf16DotRowsEmudone
	LEAQ  (DI)(R12*1), R13
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX
bf16DotRowsEmuloop4:
	CMPQ AX, R10
	JGE  bf16DotRowsEmuloop1
	PREFETCHT1 (R13)(AX*1)
	PREFETCHT1 64(R13)(AX*1)
	PREFETCHT1 128(R13)(AX*1)
	PREFETCHT1 192(R13)(AX*1)
	VMOVDQU32 0(DI)(AX*1), Z4
	VMOVDQU32 0(SI)(AX*1), Z8
	EMUDP(Z8, Z4, Z0)
	VMOVDQU32 64(DI)(AX*1), Z4
	VMOVDQU32 64(SI)(AX*1), Z8
	EMUDP(Z8, Z4, Z0)
	VMOVDQU32 128(DI)(AX*1), Z4
	VMOVDQU32 128(SI)(AX*1), Z8
	EMUDP(Z8, Z4, Z0)
	VMOVDQU32 192(DI)(AX*1), Z4
	VMOVDQU32 192(SI)(AX*1), Z8
	EMUDP(Z8, Z4, Z0)
	ADDQ $256, AX
	JMP  bf16DotRowsEmuloop4

bf16DotRowsEmuloop1:
	CMPQ AX, R9
	JGE  bf16DotRowsEmutail
	VMOVDQU32 (DI)(AX*1), Z4
	VMOVDQU32 (SI)(AX*1), Z8
	EMUDP(Z8, Z4, Z0)
	ADDQ $64, AX
	JMP  bf16DotRowsEmuloop1

bf16DotRowsEmutail:
	KORTESTD K1, K1
	JZ       bf16DotRowsEmureduce
	VMOVDQU16.Z (DI)(AX*1), K1, Z4
	VMOVDQU16.Z (SI)(AX*1), K1, Z8
	EMUDP(Z8, Z4, Z0)

bf16DotRowsEmureduce:
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	ADDQ   R8, DI
	DECQ   R11
	JMP    bf16DotRowsEmurow

bf16DotRowsEmudone:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET

// func bf16Dot4x4(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int)
// Four activation rows by four weight rows per pass, the 16 outputs in
// Z8-Z23 (row i, weight r in Z(8+4i+r)), each bf16DotRows' chain.
TEXT ·bf16Dot4x4(SB), NOSPLIT, $8-64
	MXCSR_DAZFTZ
	MOVQ k+32(FP), CX
	MOVQ CX, R9
	SHRQ $5, R9
	SHLQ $6, R9          // R9 = bytes in whole 32-value chunks
	BF16TAILMASK
	BF16X4ARGS
bf16Dot4x4group:
	CMPQ R11, $4
	JLT  bf16Dot4x4done
	BF16X4START

bf16Dot4x4loop:
	CMPQ AX, R9
	JGE  bf16Dot4x4tail
	VMOVDQU32 (SI)(AX*1), Z0
	VMOVDQU32 (BX)(AX*1), Z1
	VMOVDQU32 (R12)(AX*1), Z2
	VMOVDQU32 (R13)(AX*1), Z3
	VMOVDQU32 (DI)(AX*1), Z4
	VMOVDQU32 (R14)(AX*1), Z5
	VMOVDQU32 (R15)(AX*1), Z6
	VMOVDQU32 (R10)(AX*1), Z7
	DPBF_Z4_Z0_Z8
	DPBF_Z5_Z0_Z9
	DPBF_Z6_Z0_Z10
	DPBF_Z7_Z0_Z11
	DPBF_Z4_Z1_Z12
	DPBF_Z5_Z1_Z13
	DPBF_Z6_Z1_Z14
	DPBF_Z7_Z1_Z15
	DPBF_Z4_Z2_Z16
	DPBF_Z5_Z2_Z17
	DPBF_Z6_Z2_Z18
	DPBF_Z7_Z2_Z19
	DPBF_Z4_Z3_Z20
	DPBF_Z5_Z3_Z21
	DPBF_Z6_Z3_Z22
	DPBF_Z7_Z3_Z23
	ADDQ $64, AX
	JMP  bf16Dot4x4loop

bf16Dot4x4tail:
	KORTESTD K1, K1
	JZ       bf16Dot4x4reduce
	VMOVDQU16.Z (SI)(AX*1), K1, Z0
	VMOVDQU16.Z (BX)(AX*1), K1, Z1
	VMOVDQU16.Z (R12)(AX*1), K1, Z2
	VMOVDQU16.Z (R13)(AX*1), K1, Z3
	VMOVDQU16.Z (DI)(AX*1), K1, Z4
	VMOVDQU16.Z (R14)(AX*1), K1, Z5
	VMOVDQU16.Z (R15)(AX*1), K1, Z6
	VMOVDQU16.Z (R10)(AX*1), K1, Z7
	DPBF_Z4_Z0_Z8
	DPBF_Z5_Z0_Z9
	DPBF_Z6_Z0_Z10
	DPBF_Z7_Z0_Z11
	DPBF_Z4_Z1_Z12
	DPBF_Z5_Z1_Z13
	DPBF_Z6_Z1_Z14
	DPBF_Z7_Z1_Z15
	DPBF_Z4_Z2_Z16
	DPBF_Z5_Z2_Z17
	DPBF_Z6_Z2_Z18
	DPBF_Z7_Z2_Z19
	DPBF_Z4_Z3_Z20
	DPBF_Z5_Z3_Z21
	DPBF_Z6_Z3_Z22
	DPBF_Z7_Z3_Z23

bf16Dot4x4reduce:
	BF16X4STORE
	JMP  bf16Dot4x4group

bf16Dot4x4done:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET

// func bf16Dot4x4Emu(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int)
// bf16Dot4x4 on AVX-512F: the odd elements (high halves) of each operand
// loaded as f32 by a load that zeroes the even 16-bit words (mask K2), the
// even ones shifted up 16 bits as they load, then two FMAs per pair (odd
// first) with MXCSR DAZ|FTZ: 8 ALU operations of widening per 32 FMAs
// where a shift and a mask per operand took 16 (the same speed on the
// Sapphire Rapids this was written on, BenchmarkBF16Micro: the FMAs bind).
TEXT ·bf16Dot4x4Emu(SB), NOSPLIT, $8-64
	MXCSR_DAZFTZ
	MOVQ k+32(FP), CX
	MOVQ CX, R9
	SHRQ $5, R9
	SHLQ $6, R9          // R9 = bytes in whole 32-value chunks
	BF16TAILMASK
	MOVL  $0xaaaaaaaa, AX
	KMOVD AX, K2         // the odd 16-bit words
	KANDD K1, K2, K3     // the odd words of the tail
	BF16X4ARGS

bf16Dot4x4Emugroup:
	CMPQ R11, $4
	JLT  bf16Dot4x4Emudone
	BF16X4START

bf16Dot4x4Emuloop:
	CMPQ AX, R9
	JGE  bf16Dot4x4Emutail
	VMOVDQU16.Z (SI)(AX*1), K2, Z25
	VPSLLD $16, (SI)(AX*1), Z24
	VMOVDQU16.Z (BX)(AX*1), K2, Z27
	VPSLLD $16, (BX)(AX*1), Z26
	VMOVDQU16.Z (R12)(AX*1), K2, Z29
	VPSLLD $16, (R12)(AX*1), Z28
	VMOVDQU16.Z (R13)(AX*1), K2, Z31
	VPSLLD $16, (R13)(AX*1), Z30
	VMOVDQU16.Z (DI)(AX*1), K2, Z6
	VPSLLD $16, (DI)(AX*1), Z5
	VFMADD231PS Z6, Z25, Z8
	VFMADD231PS Z5, Z24, Z8
	VFMADD231PS Z6, Z27, Z12
	VFMADD231PS Z5, Z26, Z12
	VFMADD231PS Z6, Z29, Z16
	VFMADD231PS Z5, Z28, Z16
	VFMADD231PS Z6, Z31, Z20
	VFMADD231PS Z5, Z30, Z20
	VMOVDQU16.Z (R14)(AX*1), K2, Z6
	VPSLLD $16, (R14)(AX*1), Z5
	VFMADD231PS Z6, Z25, Z9
	VFMADD231PS Z5, Z24, Z9
	VFMADD231PS Z6, Z27, Z13
	VFMADD231PS Z5, Z26, Z13
	VFMADD231PS Z6, Z29, Z17
	VFMADD231PS Z5, Z28, Z17
	VFMADD231PS Z6, Z31, Z21
	VFMADD231PS Z5, Z30, Z21
	VMOVDQU16.Z (R15)(AX*1), K2, Z6
	VPSLLD $16, (R15)(AX*1), Z5
	VFMADD231PS Z6, Z25, Z10
	VFMADD231PS Z5, Z24, Z10
	VFMADD231PS Z6, Z27, Z14
	VFMADD231PS Z5, Z26, Z14
	VFMADD231PS Z6, Z29, Z18
	VFMADD231PS Z5, Z28, Z18
	VFMADD231PS Z6, Z31, Z22
	VFMADD231PS Z5, Z30, Z22
	VMOVDQU16.Z (R10)(AX*1), K2, Z6
	VPSLLD $16, (R10)(AX*1), Z5
	VFMADD231PS Z6, Z25, Z11
	VFMADD231PS Z5, Z24, Z11
	VFMADD231PS Z6, Z27, Z15
	VFMADD231PS Z5, Z26, Z15
	VFMADD231PS Z6, Z29, Z19
	VFMADD231PS Z5, Z28, Z19
	VFMADD231PS Z6, Z31, Z23
	VFMADD231PS Z5, Z30, Z23
	ADDQ $64, AX
	JMP  bf16Dot4x4Emuloop

bf16Dot4x4Emutail:
	KORTESTD K1, K1
	JZ       bf16Dot4x4Emureduce
	VMOVDQU16.Z (SI)(AX*1), K3, Z25
	VMOVDQU16.Z (SI)(AX*1), K1, Z24
	VPSLLD $16, Z24, Z24
	VMOVDQU16.Z (BX)(AX*1), K3, Z27
	VMOVDQU16.Z (BX)(AX*1), K1, Z26
	VPSLLD $16, Z26, Z26
	VMOVDQU16.Z (R12)(AX*1), K3, Z29
	VMOVDQU16.Z (R12)(AX*1), K1, Z28
	VPSLLD $16, Z28, Z28
	VMOVDQU16.Z (R13)(AX*1), K3, Z31
	VMOVDQU16.Z (R13)(AX*1), K1, Z30
	VPSLLD $16, Z30, Z30
	VMOVDQU16.Z (DI)(AX*1), K3, Z6
	VMOVDQU16.Z (DI)(AX*1), K1, Z5
	VPSLLD $16, Z5, Z5
	VFMADD231PS Z6, Z25, Z8
	VFMADD231PS Z5, Z24, Z8
	VFMADD231PS Z6, Z27, Z12
	VFMADD231PS Z5, Z26, Z12
	VFMADD231PS Z6, Z29, Z16
	VFMADD231PS Z5, Z28, Z16
	VFMADD231PS Z6, Z31, Z20
	VFMADD231PS Z5, Z30, Z20
	VMOVDQU16.Z (R14)(AX*1), K3, Z6
	VMOVDQU16.Z (R14)(AX*1), K1, Z5
	VPSLLD $16, Z5, Z5
	VFMADD231PS Z6, Z25, Z9
	VFMADD231PS Z5, Z24, Z9
	VFMADD231PS Z6, Z27, Z13
	VFMADD231PS Z5, Z26, Z13
	VFMADD231PS Z6, Z29, Z17
	VFMADD231PS Z5, Z28, Z17
	VFMADD231PS Z6, Z31, Z21
	VFMADD231PS Z5, Z30, Z21
	VMOVDQU16.Z (R15)(AX*1), K3, Z6
	VMOVDQU16.Z (R15)(AX*1), K1, Z5
	VPSLLD $16, Z5, Z5
	VFMADD231PS Z6, Z25, Z10
	VFMADD231PS Z5, Z24, Z10
	VFMADD231PS Z6, Z27, Z14
	VFMADD231PS Z5, Z26, Z14
	VFMADD231PS Z6, Z29, Z18
	VFMADD231PS Z5, Z28, Z18
	VFMADD231PS Z6, Z31, Z22
	VFMADD231PS Z5, Z30, Z22
	VMOVDQU16.Z (R10)(AX*1), K3, Z6
	VMOVDQU16.Z (R10)(AX*1), K1, Z5
	VPSLLD $16, Z5, Z5
	VFMADD231PS Z6, Z25, Z11
	VFMADD231PS Z5, Z24, Z11
	VFMADD231PS Z6, Z27, Z15
	VFMADD231PS Z5, Z26, Z15
	VFMADD231PS Z6, Z29, Z19
	VFMADD231PS Z5, Z28, Z19
	VFMADD231PS Z6, Z31, Z23
	VFMADD231PS Z5, Z30, Z23

bf16Dot4x4Emureduce:
	BF16X4STORE
	JMP  bf16Dot4x4Emugroup

bf16Dot4x4Emudone:
	LDMXCSR old-4(SP)
	VZEROUPPER
	RET

// func bf16Round(dst *byte, x *float32, n int)
// VCVTNEPS2BF16, 16 values a step, the tail masked.
TEXT ·bf16Round(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	ANDQ $-16, R9
	TAILMASK
	XORQ AX, AX

bf16rloop:
	CMPQ AX, R9
	JGE  bf16rtail
	VMOVUPS (SI)(AX*4), Z0
	CVTBF_Z0_Y1
	VMOVDQU16 Y1, (DI)(AX*2)
	ADDQ $16, AX
	JMP  bf16rloop

bf16rtail:
	KORTESTW K1, K1
	JZ       bf16rdone
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	CVTBF_Z0_Y1
	VMOVDQU16 Y1, K1, (DI)(AX*2)

bf16rdone:
	VZEROUPPER
	RET

// func bf16RoundEmu(dst *byte, x *float32, n int)
// bf16Round on AVX-512F: round to nearest even by integer adds (u +
// 0x7fff + lsb), a zero of its sign for subnormal inputs, the quiet NaN
// (u>>16)|0x40 for NaNs, 16 values a step, the tail masked.
TEXT ·bf16RoundEmu(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, R9
	ANDQ $-16, R9
	TAILMASK
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z10
	MOVL         $1, AX
	VPBROADCASTD AX, Z11
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z12
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x8000, AX
	VPBROADCASTD AX, Z14
	MOVL         $0x40, AX
	VPBROADCASTD AX, Z15
	XORQ AX, AX

bf16eloop:
	CMPQ AX, R9
	JGE  bf16etail
	VMOVDQU32 (SI)(AX*4), Z0
	BF16ROUNDEMU
	VMOVDQU16 Y7, (DI)(AX*2)
	ADDQ $16, AX
	JMP  bf16eloop

bf16etail:
	KORTESTW K1, K1
	JZ       bf16edone
	VMOVDQU32.Z (SI)(AX*4), K1, Z0
	BF16ROUNDEMU
	VMOVDQU16 Y7, K1, (DI)(AX*2)

bf16edone:
	VZEROUPPER
	RET
