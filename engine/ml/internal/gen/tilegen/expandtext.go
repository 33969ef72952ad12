package main

// exIntro is expand_amd64.s's prose, constants and the expanders' shared
// prologue macro, written once (see expand.go).
const exIntro = `//go:build amd64 && !purego

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

`
