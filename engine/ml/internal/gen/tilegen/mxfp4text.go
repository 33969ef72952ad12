package main

// mxIntro is mxfp4_amd64.s's prose, constants and expandMXFP4 (a loop
// of its own), written once (see expand.go for the matvec).
const mxIntro = `//go:build amd64 && !purego

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


`
