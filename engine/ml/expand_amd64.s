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

DATA g40mask<>+0(SB)/4, $0x0f0f0f0f
GLOBL g40mask<>(SB), RODATA|NOPTR, $4

// func gemvQ40VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)
// dst[r] = the Q4_0 product of the quantized activation row x and row r of
// the 16 Q4_0 rows at w (stride rb bytes, nb blocks), for the rows r set
// in mask: gemvQ8VNNI's int32 block sums and f32 steps, on the nibbles
// (unsigned, so VPDPBUSD takes them as they are) with the activation
// block's bias/16 = -8*sum(q) as the correction for their offset 8. Each
// pair of rows is loaded into 128-bit lanes 0 and 2, the high nibbles
// rotated into lanes 1 and 3 (VALIGNQ), then masked (VPTERNLOGD), which
// gives gemvQ8VNNI's layout: row k in the low 256 bits, row k+4 in the
// high. The same blocks pfd bytes further on are prefetched.
TEXT ·gemvQ40VNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPBROADCASTD g40mask<>(SB), Z27
	VPXORD       Z31, Z31, Z31
	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

g40loop:
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
	MOVWQZX         0(SI), AX
	MOVWQZX         0(SI)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X26
	MOVWQZX         0(R8), AX
	MOVWQZX         0(R8)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X26, X26
	MOVWQZX         0(R9), AX
	MOVWQZX         0(R9)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X25
	MOVWQZX         0(R10), AX
	MOVWQZX         0(R10)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X25, X25
	VINSERTI32X4    $1, X25, Y26, Y26
	VBROADCASTI64X4 8(DI), Z30
	VMOVDQU         2(SI), X0
	VINSERTI32X4    $2, 2(R8), Z0, Z0
	VPSRLW          $4, Z0, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z0
	VPXORD          Z8, Z8, Z8
	VPDPBUSD        Z30, Z0, Z8
	VMOVDQU         2(SI)(CX*1), X1
	VINSERTI32X4    $2, 2(R8)(CX*1), Z1, Z1
	VPSRLW          $4, Z1, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z1
	VPXORD          Z9, Z9, Z9
	VPDPBUSD        Z30, Z1, Z9
	VMOVDQU         2(SI)(CX*2), X2
	VINSERTI32X4    $2, 2(R8)(CX*2), Z2, Z2
	VPSRLW          $4, Z2, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z2
	VPXORD          Z10, Z10, Z10
	VPDPBUSD        Z30, Z2, Z10
	VMOVDQU         2(SI)(DX*1), X3
	VINSERTI32X4    $2, 2(R8)(DX*1), Z3, Z3
	VPSRLW          $4, Z3, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z3
	VPXORD          Z11, Z11, Z11
	VPDPBUSD        Z30, Z3, Z11
	VMOVDQU         2(R9), X4
	VINSERTI32X4    $2, 2(R10), Z4, Z4
	VPSRLW          $4, Z4, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z4
	VPXORD          Z12, Z12, Z12
	VPDPBUSD        Z30, Z4, Z12
	VMOVDQU         2(R9)(CX*1), X5
	VINSERTI32X4    $2, 2(R10)(CX*1), Z5, Z5
	VPSRLW          $4, Z5, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z5
	VPXORD          Z13, Z13, Z13
	VPDPBUSD        Z30, Z5, Z13
	VMOVDQU         2(R9)(CX*2), X6
	VINSERTI32X4    $2, 2(R10)(CX*2), Z6, Z6
	VPSRLW          $4, Z6, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z6
	VPXORD          Z14, Z14, Z14
	VPDPBUSD        Z30, Z6, Z14
	VMOVDQU         2(R9)(DX*1), X7
	VINSERTI32X4    $2, 2(R10)(DX*1), Z7, Z7
	VPSRLW          $4, Z7, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z7
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
	VPBROADCASTD    4(DI), Z17
	VPSRAD          $4, Z17, Z17
	VPADDD          Z17, Z16, Z16
	VCVTPH2PS       Y26, Z26
	VMULPS.BCST     (DI), Z26, Z26
	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
	ADDQ            $18, SI
	ADDQ            $18, R8
	ADDQ            $18, R9
	ADDQ            $18, R10
	ADDQ            $18, R11
	ADDQ            $18, R12
	ADDQ            $18, R13
	ADDQ            $18, R14
	ADDQ            $40, DI
	DECQ            BX
	JNZ             g40loop

	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET

// The IQ4_NL code book plus 128 (unsigned, as VPDPBUSD takes its first
// operand; the activation bias -128*sum(q) corrects it, as for Q8_0).
DATA exIQ4NLu<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA exIQ4NLu<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL exIQ4NLu<>(SB), RODATA|NOPTR, $16

// func gemvIQ4NLVNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)
// gemvQ40VNNI for IQ4_NL: the nibbles index the code book (VPSHUFB) before
// the products, which are then gemvQ8VNNI's.
TEXT ·gemvIQ4NLVNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPBROADCASTD g40mask<>(SB), Z27
	VPXORD       Z31, Z31, Z31
	VBROADCASTI32X4 exIQ4NLu<>(SB), Z29
	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

gnlloop:
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
	MOVWQZX         0(SI), AX
	MOVWQZX         0(SI)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X26
	MOVWQZX         0(R8), AX
	MOVWQZX         0(R8)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X26, X26
	MOVWQZX         0(R9), AX
	MOVWQZX         0(R9)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X25
	MOVWQZX         0(R10), AX
	MOVWQZX         0(R10)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X25, X25
	VINSERTI32X4    $1, X25, Y26, Y26
	VBROADCASTI64X4 8(DI), Z30
	VMOVDQU         2(SI), X0
	VINSERTI32X4    $2, 2(R8), Z0, Z0
	VPSRLW          $4, Z0, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z0
	VPSHUFB         Z0, Z29, Z0
	VPXORD          Z8, Z8, Z8
	VPDPBUSD        Z30, Z0, Z8
	VMOVDQU         2(SI)(CX*1), X1
	VINSERTI32X4    $2, 2(R8)(CX*1), Z1, Z1
	VPSRLW          $4, Z1, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z1
	VPSHUFB         Z1, Z29, Z1
	VPXORD          Z9, Z9, Z9
	VPDPBUSD        Z30, Z1, Z9
	VMOVDQU         2(SI)(CX*2), X2
	VINSERTI32X4    $2, 2(R8)(CX*2), Z2, Z2
	VPSRLW          $4, Z2, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z2
	VPSHUFB         Z2, Z29, Z2
	VPXORD          Z10, Z10, Z10
	VPDPBUSD        Z30, Z2, Z10
	VMOVDQU         2(SI)(DX*1), X3
	VINSERTI32X4    $2, 2(R8)(DX*1), Z3, Z3
	VPSRLW          $4, Z3, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z3
	VPSHUFB         Z3, Z29, Z3
	VPXORD          Z11, Z11, Z11
	VPDPBUSD        Z30, Z3, Z11
	VMOVDQU         2(R9), X4
	VINSERTI32X4    $2, 2(R10), Z4, Z4
	VPSRLW          $4, Z4, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z4
	VPSHUFB         Z4, Z29, Z4
	VPXORD          Z12, Z12, Z12
	VPDPBUSD        Z30, Z4, Z12
	VMOVDQU         2(R9)(CX*1), X5
	VINSERTI32X4    $2, 2(R10)(CX*1), Z5, Z5
	VPSRLW          $4, Z5, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z5
	VPSHUFB         Z5, Z29, Z5
	VPXORD          Z13, Z13, Z13
	VPDPBUSD        Z30, Z5, Z13
	VMOVDQU         2(R9)(CX*2), X6
	VINSERTI32X4    $2, 2(R10)(CX*2), Z6, Z6
	VPSRLW          $4, Z6, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z6
	VPSHUFB         Z6, Z29, Z6
	VPXORD          Z14, Z14, Z14
	VPDPBUSD        Z30, Z6, Z14
	VMOVDQU         2(R9)(DX*1), X7
	VINSERTI32X4    $2, 2(R10)(DX*1), Z7, Z7
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
	VCVTPH2PS       Y26, Z26
	VMULPS.BCST     (DI), Z26, Z26
	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
	ADDQ            $18, SI
	ADDQ            $18, R8
	ADDQ            $18, R9
	ADDQ            $18, R10
	ADDQ            $18, R11
	ADDQ            $18, R12
	ADDQ            $18, R13
	ADDQ            $18, R14
	ADDQ            $40, DI
	DECQ            BX
	JNZ             gnlloop

	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET

DATA exQh5<>+0(SB)/8, $0x0000000000000000
DATA exQh5<>+8(SB)/8, $0x0101010101010101
DATA exQh5<>+16(SB)/8, $0x0202020202020202
DATA exQh5<>+24(SB)/8, $0x0303030303030303
GLOBL exQh5<>(SB), RODATA|NOPTR, $32

DATA g50sixteen<>+0(SB)/4, $0x10101010
GLOBL g50sixteen<>(SB), RODATA|NOPTR, $4

// func gemvQ50VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)
// gemvQ40VNNI for Q5_0: each pair's 32-bit high-bit words are broadcast to
// its two 128-bit lanes each, spread to bytes (VPSHUFB), tested per bit
// (VPTESTMB) and added as 16 under that mask; the unsigned 5-bit values
// then take bias/8 = -16*sum(q) as the correction for their offset 16.
TEXT ·gemvQ50VNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPBROADCASTD g40mask<>(SB), Z27
	VPXORD       Z31, Z31, Z31
	VBROADCASTI64X4 exQh5<>(SB), Z28
	VBROADCASTI32X4 exBits<>(SB), Z29
	VPBROADCASTD g50sixteen<>(SB), Z24
	MOVL         $0xff00, AX
	KMOVW        AX, K3
	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

g50loop:
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
	MOVWQZX         0(SI), AX
	MOVWQZX         0(SI)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(SI)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X26
	MOVWQZX         0(R8), AX
	MOVWQZX         0(R8)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R8)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X26, X26
	MOVWQZX         0(R9), AX
	MOVWQZX         0(R9)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R9)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VMOVQ           AX, X25
	MOVWQZX         0(R10), AX
	MOVWQZX         0(R10)(CX*1), R15
	SHLQ            $16, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(CX*2), R15
	SHLQ            $32, R15
	ORQ             R15, AX
	MOVWQZX         0(R10)(DX*1), R15
	SHLQ            $48, R15
	ORQ             R15, AX
	VPINSRQ         $1, AX, X25, X25
	VINSERTI32X4    $1, X25, Y26, Y26
	VBROADCASTI64X4 8(DI), Z30
	VMOVDQU         6(SI), X0
	VINSERTI32X4    $2, 6(R8), Z0, Z0
	VPSRLW          $4, Z0, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z0
	VPBROADCASTD    2(SI), Z22
	VPBROADCASTD    2(R8), K3, Z22
	VPSHUFB         Z28, Z22, Z22
	VPTESTMB        Z29, Z22, K2
	VPADDB          Z24, Z0, K2, Z0
	VPXORD          Z8, Z8, Z8
	VPDPBUSD        Z30, Z0, Z8
	VMOVDQU         6(SI)(CX*1), X1
	VINSERTI32X4    $2, 6(R8)(CX*1), Z1, Z1
	VPSRLW          $4, Z1, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z1
	VPBROADCASTD    2(SI)(CX*1), Z23
	VPBROADCASTD    2(R8)(CX*1), K3, Z23
	VPSHUFB         Z28, Z23, Z23
	VPTESTMB        Z29, Z23, K2
	VPADDB          Z24, Z1, K2, Z1
	VPXORD          Z9, Z9, Z9
	VPDPBUSD        Z30, Z1, Z9
	VMOVDQU         6(SI)(CX*2), X2
	VINSERTI32X4    $2, 6(R8)(CX*2), Z2, Z2
	VPSRLW          $4, Z2, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z2
	VPBROADCASTD    2(SI)(CX*2), Z22
	VPBROADCASTD    2(R8)(CX*2), K3, Z22
	VPSHUFB         Z28, Z22, Z22
	VPTESTMB        Z29, Z22, K2
	VPADDB          Z24, Z2, K2, Z2
	VPXORD          Z10, Z10, Z10
	VPDPBUSD        Z30, Z2, Z10
	VMOVDQU         6(SI)(DX*1), X3
	VINSERTI32X4    $2, 6(R8)(DX*1), Z3, Z3
	VPSRLW          $4, Z3, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z3
	VPBROADCASTD    2(SI)(DX*1), Z23
	VPBROADCASTD    2(R8)(DX*1), K3, Z23
	VPSHUFB         Z28, Z23, Z23
	VPTESTMB        Z29, Z23, K2
	VPADDB          Z24, Z3, K2, Z3
	VPXORD          Z11, Z11, Z11
	VPDPBUSD        Z30, Z3, Z11
	VMOVDQU         6(R9), X4
	VINSERTI32X4    $2, 6(R10), Z4, Z4
	VPSRLW          $4, Z4, Z18
	VALIGNQ         $6, Z18, Z18, Z18
	VPTERNLOGD      $0xa8, Z27, Z18, Z4
	VPBROADCASTD    2(R9), Z22
	VPBROADCASTD    2(R10), K3, Z22
	VPSHUFB         Z28, Z22, Z22
	VPTESTMB        Z29, Z22, K2
	VPADDB          Z24, Z4, K2, Z4
	VPXORD          Z12, Z12, Z12
	VPDPBUSD        Z30, Z4, Z12
	VMOVDQU         6(R9)(CX*1), X5
	VINSERTI32X4    $2, 6(R10)(CX*1), Z5, Z5
	VPSRLW          $4, Z5, Z19
	VALIGNQ         $6, Z19, Z19, Z19
	VPTERNLOGD      $0xa8, Z27, Z19, Z5
	VPBROADCASTD    2(R9)(CX*1), Z23
	VPBROADCASTD    2(R10)(CX*1), K3, Z23
	VPSHUFB         Z28, Z23, Z23
	VPTESTMB        Z29, Z23, K2
	VPADDB          Z24, Z5, K2, Z5
	VPXORD          Z13, Z13, Z13
	VPDPBUSD        Z30, Z5, Z13
	VMOVDQU         6(R9)(CX*2), X6
	VINSERTI32X4    $2, 6(R10)(CX*2), Z6, Z6
	VPSRLW          $4, Z6, Z20
	VALIGNQ         $6, Z20, Z20, Z20
	VPTERNLOGD      $0xa8, Z27, Z20, Z6
	VPBROADCASTD    2(R9)(CX*2), Z22
	VPBROADCASTD    2(R10)(CX*2), K3, Z22
	VPSHUFB         Z28, Z22, Z22
	VPTESTMB        Z29, Z22, K2
	VPADDB          Z24, Z6, K2, Z6
	VPXORD          Z14, Z14, Z14
	VPDPBUSD        Z30, Z6, Z14
	VMOVDQU         6(R9)(DX*1), X7
	VINSERTI32X4    $2, 6(R10)(DX*1), Z7, Z7
	VPSRLW          $4, Z7, Z21
	VALIGNQ         $6, Z21, Z21, Z21
	VPTERNLOGD      $0xa8, Z27, Z21, Z7
	VPBROADCASTD    2(R9)(DX*1), Z23
	VPBROADCASTD    2(R10)(DX*1), K3, Z23
	VPSHUFB         Z28, Z23, Z23
	VPTESTMB        Z29, Z23, K2
	VPADDB          Z24, Z7, K2, Z7
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
	VPBROADCASTD    4(DI), Z17
	VPSRAD          $3, Z17, Z17
	VPADDD          Z17, Z16, Z16
	VCVTPH2PS       Y26, Z26
	VMULPS.BCST     (DI), Z26, Z26
	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
	ADDQ            $22, SI
	ADDQ            $22, R8
	ADDQ            $22, R9
	ADDQ            $22, R10
	ADDQ            $22, R11
	ADDQ            $22, R12
	ADDQ            $22, R13
	ADDQ            $22, R14
	ADDQ            $40, DI
	DECQ            BX
	JNZ             g50loop

	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET

