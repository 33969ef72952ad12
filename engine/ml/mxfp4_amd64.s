//go:build amd64 && !purego

#include "textflag.h"

// Expansion of MXFP4 blocks into Q8_0 blocks (see mxfp4_amd64.go): the
// E8M0 scale becomes the f16 of the same power of two (looked up in a
// 256-entry table, 0xffff where f16 cannot hold it), the 16 bytes of
// nibbles become 32 int8 code values through an in-register table.

DATA mxMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mxMask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mxMask0F<>(SB), RODATA|NOPTR, $16

// Nibbles whose low three bits are zero encode +0 and -0.
DATA mxMask77<>+0(SB)/8, $0x7777777777777777
DATA mxMask77<>+8(SB)/8, $0x7777777777777777
GLOBL mxMask77<>(SB), RODATA|NOPTR, $16

// The doubled E2M1 values: 0 1 2 3 4 6 8 12 0 -1 -2 -3 -4 -6 -8 -12.
DATA mxKvalues<>+0(SB)/8, $0x0c08060403020100
DATA mxKvalues<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxKvalues<>(SB), RODATA|NOPTR, $16

// func expandMXFP4(dst *byte, w *byte, rb int, rows int, nb int, tab *uint16) int
//
// dst receives rows x nb Q8_0 blocks (row stride nb*34 bytes); row r of
// the source starts at w + r*rb. A block whose scale the table marks
// 0xffff gets scale 0: exact when all its values are zero, otherwise
// counted in the result, and the caller must not use the tile.
TEXT ·expandMXFP4(SB), NOSPLIT, $0-56
	MOVQ    dst+0(FP), DI
	MOVQ    w+8(FP), R8
	MOVQ    rb+16(FP), R9
	MOVQ    rows+24(FP), R10
	MOVQ    tab+40(FP), R11
	XORQ    R12, R12
	VMOVDQU mxMask0F<>(SB), X15
	VMOVDQU mxKvalues<>(SB), X14
	VMOVDQU mxMask77<>(SB), X13

mxrow:
	TESTQ R10, R10
	JZ    mxdone
	MOVQ  R8, SI
	MOVQ  nb+32(FP), CX

mxblk:
	MOVBLZX (SI), AX
	MOVWLZX (R11)(AX*2), BX
	VMOVDQU 1(SI), X0
	CMPL    BX, $0xffff
	JEQ     mxodd

mxstore:
	MOVW    BX, (DI)
	VPSRLW  $4, X0, X1
	VPAND   X15, X0, X0
	VPAND   X15, X1, X1
	VPSHUFB X0, X14, X0
	VPSHUFB X1, X14, X1
	VMOVDQU X0, 2(DI)
	VMOVDQU X1, 18(DI)
	ADDQ    $17, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     mxblk
	ADDQ    R9, R8
	DECQ    R10
	JMP     mxrow

mxodd:
	XORL  BX, BX
	VPTEST X13, X0
	JZ    mxstore
	INCQ  R12
	JMP   mxstore

mxdone:
	MOVQ R12, ret+48(FP)
	RET

// The doubled E2M1 values plus 128 (unsigned, as VPDPBUSD takes its first
// operand; the activation bias -128*sum(q) corrects it, as for Q8_0).
DATA mxKvaluesU<>+0(SB)/8, $0x8c88868483828180
DATA mxKvaluesU<>+8(SB)/8, $0x74787a7c7d7e7f80
GLOBL mxKvaluesU<>(SB), RODATA|NOPTR, $16

DATA mxOne<>+0(SB)/4, $1
GLOBL mxOne<>(SB), RODATA|NOPTR, $4

DATA mxTwo<>+0(SB)/4, $2
GLOBL mxTwo<>(SB), RODATA|NOPTR, $4

// 2^-128, the E8M0 half scale of e = 0, as float32 bits.
DATA mxSub<>+0(SB)/4, $0x00200000
GLOBL mxSub<>(SB), RODATA|NOPTR, $4

// The mask of the low nibbles, per dword.
DATA mxG40mask<>+0(SB)/4, $0x0f0f0f0f
GLOBL mxG40mask<>(SB), RODATA|NOPTR, $4

// func gemvMXFP4VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)
// gemvIQ4NLVNNI (expand_amd64.s) for MXFP4's 17-byte blocks: the code
// values come from the doubled E2M1 table, and the 16 rows' E8M0 scale
// bytes become the float32 2^(e-128) exactly (ggml_e8m0_to_fp32_half:
// exponent field e-1, or the subnormal 0x00200000<<e for e < 2) before
// they multiply the activation scale.
TEXT ·gemvMXFP4VNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPBROADCASTD mxG40mask<>(SB), Z27
	VPXORD       Z31, Z31, Z31
	VBROADCASTI32X4 mxKvaluesU<>(SB), Z29
	VPBROADCASTD    mxOne<>(SB), Z24
	VPBROADCASTD    mxTwo<>(SB), Z23
	VPBROADCASTD    mxSub<>(SB), Z22
	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

gmxloop:
	PREFETCHT0      (R11)
	PREFETCHT0      (R11)(CX*1)
	PREFETCHT0      (R11)(CX*2)
	PREFETCHT0      (R11)(DX*1)
	PREFETCHT0      (R12)
	PREFETCHT0      (R12)(CX*1)
	PREFETCHT0      (R12)(CX*2)
	PREFETCHT0      (R12)(DX*1)
	PREFETCHT0      (R13)
	PREFETCHT0      (R13)(CX*1)
	PREFETCHT0      (R13)(CX*2)
	PREFETCHT0      (R13)(DX*1)
	PREFETCHT0      (R14)
	PREFETCHT0      (R14)(CX*1)
	PREFETCHT0      (R14)(CX*2)
	PREFETCHT0      (R14)(DX*1)
	MOVBQZX         0(SI), AX
	MOVBQZX         0(SI)(CX*1), R15
	SHLQ            $8, R15
	ORQ             R15, AX
	MOVBQZX         0(SI)(CX*2), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVBQZX         0(SI)(DX*1), R15
	SHLQ            $24, R15
	ORQ             R15, AX
	MOVBQZX         0(R8), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVBQZX         0(R8)(CX*1), R15
	SHLQ            $40, R15
	ORQ             R15, AX
	MOVBQZX         0(R8)(CX*2), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	MOVBQZX         0(R8)(DX*1), R15
	SHLQ            $56, R15
	ORQ             R15, AX
	VMOVQ           AX, X26
	MOVBQZX         0(R9), AX
	MOVBQZX         0(R9)(CX*1), R15
	SHLQ            $8, R15
	ORQ             R15, AX
	MOVBQZX         0(R9)(CX*2), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVBQZX         0(R9)(DX*1), R15
	SHLQ            $24, R15
	ORQ             R15, AX
	MOVBQZX         0(R10), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVBQZX         0(R10)(CX*1), R15
	SHLQ            $40, R15
	ORQ             R15, AX
	MOVBQZX         0(R10)(CX*2), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	MOVBQZX         0(R10)(DX*1), R15
	SHLQ            $56, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X26, X26
	VPMOVZXBD       X26, Z26
	VBROADCASTI64X4 8(DI), Z30
	VMOVDQU         1(SI), X0
	VINSERTI32X4    $2, 1(R8), Z0, Z0
	VPSRLW          $4, Z0, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z0
	VPSHUFB         Z0, Z29, Z0
	VPXORD          Z8, Z8, Z8
	VPDPBUSD        Z30, Z0, Z8
	VMOVDQU         1(SI)(CX*1), X1
	VINSERTI32X4    $2, 1(R8)(CX*1), Z1, Z1
	VPSRLW          $4, Z1, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z1
	VPSHUFB         Z1, Z29, Z1
	VPXORD          Z9, Z9, Z9
	VPDPBUSD        Z30, Z1, Z9
	VMOVDQU         1(SI)(CX*2), X2
	VINSERTI32X4    $2, 1(R8)(CX*2), Z2, Z2
	VPSRLW          $4, Z2, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z2
	VPSHUFB         Z2, Z29, Z2
	VPXORD          Z10, Z10, Z10
	VPDPBUSD        Z30, Z2, Z10
	VMOVDQU         1(SI)(DX*1), X3
	VINSERTI32X4    $2, 1(R8)(DX*1), Z3, Z3
	VPSRLW          $4, Z3, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z3
	VPSHUFB         Z3, Z29, Z3
	VPXORD          Z11, Z11, Z11
	VPDPBUSD        Z30, Z3, Z11
	VMOVDQU         1(R9), X4
	VINSERTI32X4    $2, 1(R10), Z4, Z4
	VPSRLW          $4, Z4, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z4
	VPSHUFB         Z4, Z29, Z4
	VPXORD          Z12, Z12, Z12
	VPDPBUSD        Z30, Z4, Z12
	VMOVDQU         1(R9)(CX*1), X5
	VINSERTI32X4    $2, 1(R10)(CX*1), Z5, Z5
	VPSRLW          $4, Z5, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z5
	VPSHUFB         Z5, Z29, Z5
	VPXORD          Z13, Z13, Z13
	VPDPBUSD        Z30, Z5, Z13
	VMOVDQU         1(R9)(CX*2), X6
	VINSERTI32X4    $2, 1(R10)(CX*2), Z6, Z6
	VPSRLW          $4, Z6, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z6
	VPSHUFB         Z6, Z29, Z6
	VPXORD          Z14, Z14, Z14
	VPDPBUSD        Z30, Z6, Z14
	VMOVDQU         1(R9)(DX*1), X7
	VINSERTI32X4    $2, 1(R10)(DX*1), Z7, Z7
	VPSRLW          $4, Z7, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z7
	VPSHUFB         Z7, Z29, Z7
	VPXORD          Z15, Z15, Z15
	VPDPBUSD        Z30, Z7, Z15
	VPUNPCKLDQ      Z9, Z8, Z16
	VPUNPCKHDQ      Z9, Z8, Z8
	VPADDD          Z16, Z8, Z8
	VPUNPCKLDQ      Z11, Z10, Z16
	VPUNPCKHDQ      Z11, Z10, Z10
	VPADDD          Z16, Z10, Z10
	VPUNPCKLDQ      Z13, Z12, Z16
	VPUNPCKHDQ      Z13, Z12, Z12
	VPADDD          Z16, Z12, Z12
	VPUNPCKLDQ      Z15, Z14, Z16
	VPUNPCKHDQ      Z15, Z14, Z14
	VPADDD          Z16, Z14, Z14
	VPUNPCKLQDQ     Z10, Z8, Z16
	VPUNPCKHQDQ     Z10, Z8, Z8
	VPADDD          Z16, Z8, Z8
	VPUNPCKLQDQ     Z14, Z12, Z16
	VPUNPCKHQDQ     Z14, Z12, Z12
	VPADDD          Z16, Z12, Z12
	VSHUFI32X4      $0x88, Z12, Z8, Z16
	VSHUFI32X4      $0xdd, Z12, Z8, Z17
	VPADDD          Z17, Z16, Z16
	VPADDD.BCST     4(DI), Z16, Z16
	VPSUBD          Z24, Z26, Z25
	VPSLLD          $23, Z25, Z25
	VPCMPUD         $1, Z23, Z26, K2
	VPSLLVD         Z26, Z22, K2, Z25
	VMULPS.BCST     (DI), Z25, Z26
	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
	ADDQ            $17, SI
	ADDQ            $17, R8
	ADDQ            $17, R9
	ADDQ            $17, R10
	ADDQ            $17, R11
	ADDQ            $17, R12
	ADDQ            $17, R13
	ADDQ            $17, R14
	ADDQ            $40, DI
	DECQ            BX
	JNZ             gmxloop

	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET
