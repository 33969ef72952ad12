package main

import "fmt"

// genKQFew writes kqfew_amd64.s: Q4_K and Q6_K products of four weight
// rows and a few (1 to 4) activation rows with AVX-512 VNNI, each weight
// block decoded once for all the activation rows (a speculative verify
// step, a small decode batch, the tokens of one MoE expert).
func genKQFew() {
	T(kqFewIntro)
	T(kqZMacros)
	T(kqFewMacros)
	for n := 1; n <= 4; n++ {
		kqFewQ4K(n)
		P("")
	}
	T(kqFewQ6Macros)
	for n := 1; n <= 4; n++ {
		kqFewQ6K(n)
		if n < 4 {
			P("")
		}
	}
}

// kqFewAct is activation row j's address at byte offset off: SI + j*as
// (R9 = as, R11 = 3*as).
func kqFewAct(j int, off string) string {
	return off + "(SI)" + kqActRow[j]
}

// kqFewQ4K writes kqQ4KFew{n}VNNIZ. Weight row k's integer sums for
// activation row j collect in Z(4j+k) (folded to its low 256 bits per
// block, as the one-row kernel folds its Z8+k), so HSUM4x8 of Y(4j)..
// Y(4j+3) gives activation row j the one-row kernel's four int32 sums;
// the float tail is then the one-row kernel's, row by row, into X(20+j).
func kqFewQ4K(n int) {
	name := fmt.Sprintf("kqQ4KFew%dVNNIZ", n)
	P("// func %s(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)", name)
	P("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	P("\tMOVQ w+0(FP), DI")
	P("\tMOVQ ws+8(FP), R8")
	P("\tPF_DIST(q4kF%dpf)", n)
	P("\tMOVQ a+16(FP), SI")
	P("\tMOVQ as+24(FP), R9")
	P("\tLEAQ (R9)(R9*2), R11")
	P("\tLEAQ (R8)(R8*2), R10")
	P("\tMOVQ nb+32(FP), CX")
	P("\tVPBROADCASTB kqMask0F<>(SB), Z24")
	for j := range n {
		P("\tVXORPS X%d, X%d, X%d", 20+j, 20+j, 20+j)
	}
	P("")
	label := fmt.Sprintf("q4kF%dLoop", n)
	P("%s:", label)
	P("\tK4_SCALES4")
	for k := range 4 {
		P("\tWROW%d", k)
		P("\tPREFETCHT1 (BX)(R12*1)")
		P("\tPREFETCHT1 64(BX)(R12*1)")
		P("\tPREFETCHT1 128(BX)(R12*1)")
		P("\tK4_ROWSC(%d)", k)
		for j := range n {
			z := 4*j + k
			P("\tVPXORD Z%d, Z%d, Z%d", z, z, z)
		}
		for h := range 2 {
			P("\tQ4K_NIB(%d, %d, kqScPk%d<>(SB))", 16+64*h, 16+64*h+32, h)
			for j := range n {
				P("\tQ4K_ACT(%s, %s, Z%d)", kqFewAct(j, fmt.Sprint(128*h)), kqFewAct(j, fmt.Sprint(128*h+64)), 4*j+k)
			}
		}
		for j := range n {
			z := 4*j + k
			P("\tVEXTRACTI64X4 $1, Z%d, Y16", z)
			P("\tVPADDD Y16, Y%d, Y%d", z, z)
		}
	}
	P("")
	P("\tK4_DMINS")
	for j := range n {
		P("\tK4_ROWMINS(%s, %s)", kqFewAct(j, "ACT_SUMS16"), kqFewAct(j, "(ACT_SUMS16+16)"))
		P("\tHSUM4x8(Y%d, Y%d, Y%d, Y%d, X%d, X%d)", 4*j, 4*j+1, 4*j+2, 4*j+3, 4*j, 4*j+1)
		P("\tK4_FLOAT(%s, X%d, X%d)", kqFewAct(j, "ACT_SCALE"), 4*j, 20+j)
	}
	P("")
	P("\tADDQ $144, DI")
	P("\tADDQ $ACT_BLOCK, SI")
	P("\tDECQ CX")
	P("\tJNZ  %s", label)
	P("")
	P("\tMOVQ out+40(FP), DX")
	P("\tMOVQ os+48(FP), BX")
	P("\tSHLQ $2, BX")
	for j := range n {
		P("\tVMOVUPS X%d, (DX)", 20+j)
		if j < n-1 {
			P("\tADDQ BX, DX")
		}
	}
	P("\tVZEROUPPER")
	P("\tRET")
}

const kqFewIntro = `//go:build amd64 && !purego

#include "textflag.h"

// Q4_K and Q6_K products of a few activation rows (see kqfew_amd64.go): each
// kernel computes four weight rows (w + k*ws) against n activation rows
// (a + j*as) over nb super-blocks, decoding each weight block (its
// nibbles, its scales spread over the values) once for all n rows. Output
// (j, k) goes to out[j*os + k]. Per activation row the integer sums are
// kqQ4KDot4VNNIZ's and the float arithmetic is its, in its order, so every
// output has the one-row kernel's bits whatever n.
//
// Each multiply takes its activation operand, 64 values, straight from
// memory. Q4_K reads the activation rows as quantizeActQ8K writes them:
// its weight vectors are 32-byte chunks of nibbles broadcast to both
// halves, the low nibbles kept in one and the high in the other, so a
// vector is 64 consecutive values; Q6_K builds its value vectors the same
// way, from 64 ql bytes and 32 qh bytes broadcast to both halves.

// Activation block layout (q8KActBlock bytes, see quantizeActQ8K): 256
// int8 values, the f32 scale, 16 int16 sums of 16 values.
#define ACT_BLOCK 292
#define ACT_SCALE 256
#define ACT_SUMS16 260

DATA kqMask0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqMask0F<>(SB), RODATA|NOPTR, $8

DATA kqMask30<>+0(SB)/8, $0x3030303030303030
GLOBL kqMask30<>(SB), RODATA|NOPTR, $8

// BX = weight row k's block.
#define WROW0 MOVQ DI, BX
#define WROW1 LEAQ (DI)(R8*1), BX
#define WROW2 LEAQ (DI)(R8*2), BX
#define WROW3 LEAQ (DI)(R10*1), BX

// Horizontal sums of four 8-lane int32 vectors into the lanes of x0.
#define HSUM4x8(y0, y1, y2, y3, x0, x1) \
	VPHADDD      y1, y0, y0 \
	VPHADDD      y3, y2, y2 \
	VPHADDD      y2, y0, y0 \
	VEXTRACTI128 $1, y0, x1 \
	VPADDD       x1, x0, x0
`

const kqFewMacros = `// VPSHUFB indices spreading a row's scales (Z26) over the words of a
// VPACKSSDW of the dword sums of two 32-byte chunks of nibbles (Q4K_NIB):
// in each 128-bit lane words 0..3 come from the first chunk, 4..7 from
// the second; lanes 0, 1 hold the low nibbles (sub-blocks a, a+2), lanes
// 2, 3 the high (a+1, a+3).
#define SCALE_PK(name, a) \
	DATA name<>+0(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+8(SB)/8, $(0x8000800080008000+(a+2)*0x0001000100010001) \
	DATA name<>+16(SB)/8, $(0x8000800080008000+a*0x0001000100010001) \
	DATA name<>+24(SB)/8, $(0x8000800080008000+(a+2)*0x0001000100010001) \
	DATA name<>+32(SB)/8, $(0x8000800080008000+(a+1)*0x0001000100010001) \
	DATA name<>+40(SB)/8, $(0x8000800080008000+(a+3)*0x0001000100010001) \
	DATA name<>+48(SB)/8, $(0x8000800080008000+(a+1)*0x0001000100010001) \
	DATA name<>+56(SB)/8, $(0x8000800080008000+(a+3)*0x0001000100010001) \
	GLOBL name<>(SB), RODATA|NOPTR, $64

SCALE_PK(kqScPk0, 0)
SCALE_PK(kqScPk1, 4)

// VPSRLVW counts: 0 for the low 256 bits, 4 for the high.
DATA kqNibShift<>+0(SB)/8, $0
DATA kqNibShift<>+8(SB)/8, $0
DATA kqNibShift<>+16(SB)/8, $0
DATA kqNibShift<>+24(SB)/8, $0
DATA kqNibShift<>+32(SB)/8, $0x0004000400040004
DATA kqNibShift<>+40(SB)/8, $0x0004000400040004
DATA kqNibShift<>+48(SB)/8, $0x0004000400040004
DATA kqNibShift<>+56(SB)/8, $0x0004000400040004
GLOBL kqNibShift<>(SB), RODATA|NOPTR, $64

// Two 32-byte chunks of weight row BX's nibbles at off0, off1, each
// as 64 values in the activation's own order (a chunk's low nibbles are
// 32 consecutive values, its high nibbles the next 32): the first into
// Z27, the second into Z28; their sub-blocks' scales (row scales Z26,
// spread by idx) into Z29.
#define Q4K_NIB(off0, off1, idx) \
	VBROADCASTI64X4 off0(BX), Z27 \
	VPSRLVW      kqNibShift<>(SB), Z27, Z27 \
	VPANDD       Z24, Z27, Z27 \
	VBROADCASTI64X4 off1(BX), Z28 \
	VPSRLVW      kqNibShift<>(SB), Z28, Z28 \
	VPANDD       Z24, Z28, Z28 \
	VPSHUFB      idx, Z26, Z29

// One activation row's products with the half of Q4K_NIB: VPDPBUSD sums
// of four products (at most 4 x 15 x 128 in magnitude, so they pack to
// words exactly) for the low and the high nibbles, packed to words and
// multiplied by their sub-blocks' scales into acc. The integer sum is
// Q4K_HALFZ's. Uses Z16, Z17.
#define Q4K_ACT(alo, ahi, acc) \
	VPXORD       Z16, Z16, Z16 \
	VPXORD       Z17, Z17, Z17 \
	VPDPBUSD     alo, Z27, Z16 \
	VPDPBUSD     ahi, Z28, Z17 \
	VPACKSSDW    Z17, Z16, Z16 \
	VPDPWSSD     Z29, Z16, acc

// The parts of K4_MINS4 and of the one-row kernel's tail shared by every
// activation row: the mins as words into Z27, Z28 (K4_MINS4's), the
// lane gather into Z26, the four rows' d and dmin as f32 into X29, X30.
#define K4_DMINS \
	VPSHUFB       kqK4MinLo<>(SB), Z31, Z27 \
	VPSHUFB       kqK4MinHi<>(SB), Z31, Z28 \
	VMOVDQU32     kqK4Perm<>(SB), Z26 \
	VPERMD        Z25, Z26, Z25 \
	VCVTPH2PS     X25, Y25 \
	VEXTRACTF32X4 $1, Y25, X31 \
	VSHUFPS       $0x88, X31, X25, X29 \
	VSHUFPS       $0xDD, X31, X25, X30

// K4_MINS4's sums for one activation row (its sums of 16 at s0, s1):
// each row's sum of min x sums into X17. Uses Z16.
#define K4_ROWMINS(s0, s1) \
	VBROADCASTI32X4 s0, Z16 \
	VPMADDWD        Z16, Z27, Z17 \
	VBROADCASTI32X4 s1, Z16 \
	VPDPWSSD        Z16, Z28, Z17 \
	VPSHUFD         $0x4e, Z17, Z16 \
	VPADDD          Z16, Z17, Z17 \
	VPSHUFD         $0xb1, Z17, Z16 \
	VPADDD          Z16, Z17, Z17 \
	VPERMD          Z17, Z26, Z17

// The one-row kernel's float tail for one activation row (its scale at
// sc): sums x (d x scale) - mins x (dmin x scale), added to res. Uses
// X17..X19.
#define K4_FLOAT(sc, sums, res) \
	VBROADCASTSS  sc, X18 \
	VMULPS        X18, X29, X19 \
	VMULPS        X18, X30, X18 \
	VCVTDQ2PS     sums, sums \
	VMULPS        X19, sums, sums \
	VCVTDQ2PS     X17, X17 \
	VMULPS        X18, X17, X17 \
	VSUBPS        X17, sums, sums \
	VADDPS        sums, res, res

`

// kqFewQ6K writes kqQ6KFew{n}VNNIZ: Q6K_PAIRZ's integer sums, from four
// value vectors (Z20..Z23) and their spread scales (Z16..Z19) built once
// per weight row for the n activation rows. The -32 offset's term (the
// scales times the sums of 16, times 32) is subtracted with one
// VPDPWSSD of the negated, shifted scales: integer arithmetic, so the
// sums are Q6K_PAIRZ's. Float results stay in out (os = its row stride)
// between blocks.
func kqFewQ6K(n int) {
	name := fmt.Sprintf("kqQ6KFew%dVNNIZ", n)
	P("// func %s(w *byte, ws int, a *byte, as int, nb int, out *float32, os int)", name)
	P("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	P("\tMOVQ w+0(FP), DI")
	P("\tMOVQ ws+8(FP), R8")
	P("\tPF_DIST(q6kF%dpf)", n)
	P("\tMOVQ a+16(FP), SI")
	P("\tMOVQ as+24(FP), R9")
	P("\tLEAQ (R9)(R9*2), R11")
	P("\tLEAQ (R8)(R8*2), R10")
	P("\tMOVQ nb+32(FP), CX")
	P("\tMOVQ out+40(FP), DX")
	P("\tMOVQ os+48(FP), R13")
	P("\tSHLQ $2, R13")
	P("\tLEAQ (R13)(R13*2), AX")
	P("\tVPBROADCASTB kqMask0F<>(SB), Z24")
	P("\tVPBROADCASTB kqMask30<>(SB), Z25")
	P("\tVXORPS X0, X0, X0")
	for j := range n {
		P("\tVMOVUPS X0, %s", kqFewOut[j])
	}
	P("")
	label := fmt.Sprintf("q6kF%dLoop", n)
	P("%s:", label)
	for k := range 4 {
		P("\tWROW%d", k)
		P("\tQ6K_ROW")
		for j := range n {
			z := 4*j + k
			P("\tVPXORD Z%d, Z%d, Z%d", z, z, z)
		}
		for j := range n {
			z := 4*j + k
			for v := range 4 {
				P("\tQ6K_ACT(%s, Z%d, Z%d, Z%d)", kqFewAct(j, fmt.Sprint(64*v)), 20+v, 16+v, z)
			}
		}
		for j := range n {
			z := 4*j + k
			P("\tVEXTRACTI64X4 $1, Z%d, Y31", z)
			P("\tVPADDD Y31, Y%d, Y%d", z, z)
			P("\tVPDPWSSD %s, Y27, Y%d", kqFewAct(j, "ACT_SUMS16"), z)
		}
	}
	P("")
	P("\tQ6K_D")
	for j := range n {
		P("\tHSUM4x8(Y%d, Y%d, Y%d, Y%d, X%d, X%d)", 4*j, 4*j+1, 4*j+2, 4*j+3, 4*j, 4*j+1)
		P("\tQ6K_FLOAT(%s, X%d, %s)", kqFewAct(j, "ACT_SCALE"), 4*j, kqFewOut[j])
	}
	P("")
	P("\tADDQ $210, DI")
	P("\tADDQ $ACT_BLOCK, SI")
	P("\tDECQ CX")
	P("\tJNZ  %s", label)
	P("\tVZEROUPPER")
	P("\tRET")
}

// kqFewOut is output row j's address (DX = out, R13 = 4*os, AX = 12*os).
var kqFewOut = [4]string{"(DX)", "(DX)(R13*1)", "(DX)(R13*2)", "(DX)(AX*1)"}

const kqFewQ6Macros = `// VPSHUFB indices spreading four of a Q6_K row's 16-value sub-block
// scales (words, one 128-bit lane of them broadcast) over a value vector
// of 64 consecutive values: lane l takes word w+l.
#define SC6_PK(name, w) \
	DATA name<>+0(SB)/8, $((0x0100+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+8(SB)/8, $((0x0100+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+16(SB)/8, $((0x0302+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+24(SB)/8, $((0x0302+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+32(SB)/8, $((0x0504+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+40(SB)/8, $((0x0504+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+48(SB)/8, $((0x0706+(2*w)*0x0101)*0x0001000100010001) \
	DATA name<>+56(SB)/8, $((0x0706+(2*w)*0x0101)*0x0001000100010001) \
	GLOBL name<>(SB), RODATA|NOPTR, $64

SC6_PK(kqSc6Pk0, 0)
SC6_PK(kqSc6Pk1, 4)

// VPSLLVW / VPSRLVW counts moving a qh byte's bit pair of the low and
// the high 256 bits of a value vector to bits 4..5: left 4 and 2 (bits
// 0..1, 2..3), right 0 and 2 (bits 4..5, 6..7).
#define SHIFT2(name, lo, hi) \
	DATA name<>+0(SB)/8, $(lo*0x0001000100010001) \
	DATA name<>+8(SB)/8, $(lo*0x0001000100010001) \
	DATA name<>+16(SB)/8, $(lo*0x0001000100010001) \
	DATA name<>+24(SB)/8, $(lo*0x0001000100010001) \
	DATA name<>+32(SB)/8, $(hi*0x0001000100010001) \
	DATA name<>+40(SB)/8, $(hi*0x0001000100010001) \
	DATA name<>+48(SB)/8, $(hi*0x0001000100010001) \
	DATA name<>+56(SB)/8, $(hi*0x0001000100010001) \
	GLOBL name<>(SB), RODATA|NOPTR, $64

SHIFT2(kqQ6Shl, 4, 2)
SHIFT2(kqQ6Shr, 0, 2)

// Weight row BX's Q6_K block decoded for the activation rows: value
// vector v (64 consecutive values, 64v..64v+63, the activation's own
// order) into Z(20+v): the low or high nibbles of 64 ql bytes or'ed with
// the bit pairs of 32 qh bytes broadcast to both halves; the sub-block
// scales spread over them into Z16..Z19; -32 x the scales as words into
// Y27. Uses Z26, Z28..Z30.
#define Q6K_ROW \
	PREFETCHT1    (BX)(R12*1) \
	PREFETCHT1    64(BX)(R12*1) \
	PREFETCHT1    128(BX)(R12*1) \
	PREFETCHT1    192(BX)(R12*1) \
	VMOVDQU64     (BX), Z27 \
	VMOVDQU64     64(BX), Z28 \
	VBROADCASTI64X4 128(BX), Z29 \
	VBROADCASTI64X4 160(BX), Z30 \
	VPSLLVW       kqQ6Shl<>(SB), Z29, Z20 \
	VPANDD        Z25, Z20, Z20 \
	VPTERNLOGD    $0xf8, Z24, Z27, Z20 \
	VPSRLVW       kqQ6Shr<>(SB), Z29, Z21 \
	VPANDD        Z25, Z21, Z21 \
	VPSRLW        $4, Z27, Z27 \
	VPTERNLOGD    $0xf8, Z24, Z27, Z21 \
	VPSLLVW       kqQ6Shl<>(SB), Z30, Z22 \
	VPANDD        Z25, Z22, Z22 \
	VPTERNLOGD    $0xf8, Z24, Z28, Z22 \
	VPSRLVW       kqQ6Shr<>(SB), Z30, Z23 \
	VPANDD        Z25, Z23, Z23 \
	VPSRLW        $4, Z28, Z28 \
	VPTERNLOGD    $0xf8, Z24, Z28, Z23 \
	VPMOVSXBW     192(BX), Y26 \
	VSHUFI64X2    $0x00, Z26, Z26, Z28 \
	VSHUFI64X2    $0x55, Z26, Z26, Z29 \
	VPSHUFB       kqSc6Pk0<>(SB), Z28, Z16 \
	VPSHUFB       kqSc6Pk1<>(SB), Z28, Z17 \
	VPSHUFB       kqSc6Pk0<>(SB), Z29, Z18 \
	VPSHUFB       kqSc6Pk1<>(SB), Z29, Z19 \
	VPSLLW        $5, Y26, Y29 \
	VPXORD        Y27, Y27, Y27 \
	VPSUBW        Y29, Y27, Y27

// One activation row's product with value vector val (scales sc):
// Q6K_VECZ's multiply-adds, the activation vector from memory. Uses Z31.
#define Q6K_ACT(a, val, sc, acc) \
	VPMADDUBSW    a, val, Z31 \
	VPDPWSSD      sc, Z31, acc

// The four rows' d as f32 into X28 (the one-row kernel's gather).
#define Q6K_D \
	VPXORD        X28, X28, X28 \
	VPINSRW       $0, 208(DI), X28, X28 \
	LEAQ          (DI)(R8*1), BX \
	VPINSRW       $1, 208(BX), X28, X28 \
	LEAQ          (DI)(R8*2), BX \
	VPINSRW       $2, 208(BX), X28, X28 \
	LEAQ          (DI)(R10*1), BX \
	VPINSRW       $3, 208(BX), X28, X28 \
	VCVTPH2PS     X28, X28

// The one-row kernel's float tail for one activation row (its scale at
// sc): sums x (d x scale) added to the result at res. Uses X29.
#define Q6K_FLOAT(sc, sums, res) \
	VBROADCASTSS  sc, X29 \
	VMULPS        X29, X28, X29 \
	VCVTDQ2PS     sums, sums \
	VMULPS        X29, sums, sums \
	VADDPS        res, sums, sums \
	VMOVUPS       sums, res

`
