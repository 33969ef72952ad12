//go:build amd64 && !purego

#include "textflag.h"

// Expansion of 32-value weight blocks whose values fit in int8 (Q4_0,
// IQ4_NL, Q5_0) into Q8_0 blocks: the f16 scale copied, then the 32
// values as int8. The Q8_0 kernels then compute the same products bit for
// bit (see expand_amd64.go).

DATA exMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA exMask0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL exMask0F<>(SB), RODATA|NOPTR, $16

DATA exEights<>+0(SB)/8, $0x0808080808080808
DATA exEights<>+8(SB)/8, $0x0808080808080808
GLOBL exEights<>(SB), RODATA|NOPTR, $16

DATA exSixteens<>+0(SB)/8, $0x1010101010101010
DATA exSixteens<>+8(SB)/8, $0x1010101010101010
GLOBL exSixteens<>(SB), RODATA|NOPTR, $16

// The IQ4_NL code book: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
DATA exIQ4NL<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA exIQ4NL<>+8(SB)/8, $0x7159453526190d01
GLOBL exIQ4NL<>(SB), RODATA|NOPTR, $16

// Q5_0's high bits: byte j of the low (high) half takes qh byte j/8 (2+j/8),
// then bit j%8 is tested.
DATA exQhLo<>+0(SB)/8, $0x0000000000000000
DATA exQhLo<>+8(SB)/8, $0x0101010101010101
GLOBL exQhLo<>(SB), RODATA|NOPTR, $16

DATA exQhHi<>+0(SB)/8, $0x0202020202020202
DATA exQhHi<>+8(SB)/8, $0x0303030303030303
GLOBL exQhHi<>(SB), RODATA|NOPTR, $16

DATA exBits<>+0(SB)/8, $0x8040201008040201
DATA exBits<>+8(SB)/8, $0x8040201008040201
GLOBL exBits<>(SB), RODATA|NOPTR, $16

// Shared frame: func(dst *byte, w *byte, rb int, rows int, nb int).
// dst receives rows x nb Q8_0 blocks (row stride nb*34 bytes); row r of
// the source starts at w + r*rb.
#define EX_PROLOGUE \
	MOVQ dst+0(FP), DI \
	MOVQ w+8(FP), R8 \
	MOVQ rb+16(FP), R9 \
	MOVQ rows+24(FP), R10 \
	VMOVDQU exMask0F<>(SB), X15

// func expandQ40(dst *byte, w *byte, rb int, rows int, nb int)
TEXT ·expandQ40(SB), NOSPLIT, $0-40
	EX_PROLOGUE
	VMOVDQU exEights<>(SB), X14

q40row:
	TESTQ R10, R10
	JZ    q40done
	MOVQ  R8, SI
	MOVQ  nb+32(FP), CX

q40blk:
	MOVWLZX (SI), AX
	MOVW    AX, (DI)
	VMOVDQU 2(SI), X0
	VPSRLW  $4, X0, X1
	VPAND   X15, X0, X0
	VPAND   X15, X1, X1
	VPSUBB  X14, X0, X0
	VPSUBB  X14, X1, X1
	VMOVDQU X0, 2(DI)
	VMOVDQU X1, 18(DI)
	ADDQ    $18, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     q40blk
	ADDQ    R9, R8
	DECQ    R10
	JMP     q40row

q40done:
	RET

// func expandIQ4NL(dst *byte, w *byte, rb int, rows int, nb int)
TEXT ·expandIQ4NL(SB), NOSPLIT, $0-40
	EX_PROLOGUE
	VMOVDQU exIQ4NL<>(SB), X14

iq4row:
	TESTQ R10, R10
	JZ    iq4done
	MOVQ  R8, SI
	MOVQ  nb+32(FP), CX

iq4blk:
	MOVWLZX (SI), AX
	MOVW    AX, (DI)
	VMOVDQU 2(SI), X0
	VPSRLW  $4, X0, X1
	VPAND   X15, X0, X0
	VPAND   X15, X1, X1
	VPSHUFB X0, X14, X0
	VPSHUFB X1, X14, X1
	VMOVDQU X0, 2(DI)
	VMOVDQU X1, 18(DI)
	ADDQ    $18, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     iq4blk
	ADDQ    R9, R8
	DECQ    R10
	JMP     iq4row

iq4done:
	RET

// func expandQ50(dst *byte, w *byte, rb int, rows int, nb int)
TEXT ·expandQ50(SB), NOSPLIT, $0-40
	EX_PROLOGUE
	VMOVDQU exSixteens<>(SB), X14
	VMOVDQU exQhLo<>(SB), X13
	VMOVDQU exQhHi<>(SB), X12
	VMOVDQU exBits<>(SB), X11

q50row:
	TESTQ R10, R10
	JZ    q50done
	MOVQ  R8, SI
	MOVQ  nb+32(FP), CX

q50blk:
	MOVWLZX (SI), AX
	MOVW    AX, (DI)
	VMOVDQU 6(SI), X0
	VPSRLW  $4, X0, X1
	VPAND   X15, X0, X0
	VPAND   X15, X1, X1
	VPBROADCASTD 2(SI), X2
	VPSHUFB X12, X2, X3
	VPSHUFB X13, X2, X2
	VPAND   X11, X2, X2
	VPAND   X11, X3, X3
	VPCMPEQB X11, X2, X2
	VPCMPEQB X11, X3, X3
	VPAND   X14, X2, X2
	VPAND   X14, X3, X3
	VPOR    X2, X0, X0
	VPOR    X3, X1, X1
	VPSUBB  X14, X0, X0
	VPSUBB  X14, X1, X1
	VMOVDQU X0, 2(DI)
	VMOVDQU X1, 18(DI)
	ADDQ    $22, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     q50blk
	ADDQ    R9, R8
	DECQ    R10
	JMP     q50row

q50done:
	RET
