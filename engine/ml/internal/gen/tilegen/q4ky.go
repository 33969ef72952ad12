package main

import "fmt"

// kqQ4KDotY writes kqQ4KDot8VNNIY: kqQ4KDot8VNNIZ's eight rows (two
// groups of four, the scales, mins and float arithmetic as its) with the
// values on 256-bit vectors, a sub-block per vector, each sub-block's
// scale a broadcast memory operand of VPDPWSSD (the scale in both words of
// a dword, stored once per group of four rows) instead of a VPSHUFB
// spreading eight scales over a 512-bit vector; both groups' scales and
// mins are decoded before either group's rows, two multiply-add chains
// per row. Measured on one core (BenchmarkKQ8Micro, L1-resident rows,
// 3.6 GHz Zen 4): the multiply-adds alone ran at 50 GB/s, the whole
// 512-bit kernel at 27, as did this one with each group's scales decoded
// just before its rows; decoding them ahead brought it to 30.5 (the
// scale chain, VPSHUFB and a store the broadcasts read, stalled the
// rows).
// kqYAcc2 are the rows' second accumulators (the high nibbles' chain),
// registers the scales and mins leave free.
var kqYAcc2 = [4]int{27, 28, 29, 31}

func kqQ4KDotY() {
	T(kqYData)
	P("// func kqQ4KDot8VNNIY%s", kqSig)
	P("//")
	T(`// kqQ4KDot8VNNIZ on 256-bit vectors (see kqYData, kqYMacros); each row's integer
// sums are exact whatever their order and the float arithmetic is
// kqQ4KDot8VNNIZ's, so its results are the same bits.
`)
	P("TEXT ·kqQ4KDot8VNNIY(SB), NOSPLIT, $256-48")
	T(`	MOVQ w+0(FP), DI
	MOVQ ws+8(FP), R8
	PF_DIST(q4kYpf)
	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R13
	VPBROADCASTB kqMask0F<>(SB), Z24
	VMOVDQU64 kqK4ScW0<>(SB), Z26
	VMOVDQU64 kqK4ScW1<>(SB), Z30
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1

q4kYLoop:
`)
	// The super-block's activation values, chunk c's low-nibble half in
	// Y(16+2c), its high-nibble half in Y(17+2c).
	for v := range 8 {
		src := "(SI)"
		if v > 0 {
			src = fmt.Sprintf("%d(SI)", 32*v)
		}
		P("\tVMOVDQU64 %s, Y%d", src, 16+v)
	}
	// The activation scale, the same for all eight rows.
	P("\tVBROADCASTSS ACT_SCALE(SI), X15")
	// Both groups' scales (on the frame) and mins first, so that their
	// dependency chains run ahead of the rows' multiply-adds instead of
	// stalling them; group 0's mins and (d, dmin) move to X13, X14.
	T(`	K4_SCALES4
	K4_SCW(0)
	K4_MINS4
	VMOVDQA X12, X13
	VMOVDQA X4, X14
	XCHGQ DI, R13
	K4_SCALES4
	K4_SCW(128)
	K4_MINS4
	XCHGQ DI, R13
`)
	for g := range 2 {
		if g == 1 {
			P("\tXCHGQ DI, R13")
		}
		for k := range 4 {
			P("\tPAIR%d", k)
			P("\tPREFETCHT1 (BX)(R12*1)")
			P("\tPREFETCHT1 64(BX)(R12*1)")
			P("\tPREFETCHT1 128(BX)(R12*1)")
			P("\tVPXOR Y%d, Y%d, Y%d", 8+k, 8+k, 8+k)
			P("\tVPXORD Y%d, Y%d, Y%d", kqYAcc2[k], kqYAcc2[k], kqYAcc2[k])
			for c := range 4 {
				sc := 128*g + 16*k + 8*(c%2) + 64*(c/2)
				P("\tQ4K_CHUNKY(%d, Y%d, Y%d, %d, %d, Y%d, Y%d)", c, 16+2*c, 17+2*c, sc, sc+4, 8+k, kqYAcc2[k])
			}
		}
		P("")
		for k := range 4 {
			P("\tVPADDD Y%d, Y%d, Y%d", kqYAcc2[k], 8+k, 8+k)
		}
		P("\tHSUM4x8(Y8, Y9, Y10, Y11, X8, X9)")
		// K4_FLOAT's arithmetic on group g's (d, dmin) pairs and mins.
		dd, mins := "X14", "X13"
		if g == 1 {
			dd, mins = "X4", "X12"
		}
		P("\tVCVTPH2PS %s, Y%s", dd, dd[1:])
		P("\tVEXTRACTF128 $1, Y%s, X5", dd[1:])
		P("\tVSHUFPS $0x88, X5, %s, X6", dd)
		P("\tVSHUFPS $0xDD, X5, %s, X5", dd)
		T(`	VMULPS  X15, X6, X6
	VMULPS  X15, X5, X5
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
`)
		P("\tVCVTDQ2PS %s, %s", mins, mins)
		P("\tVMULPS  X5, %s, %s", mins, mins)
		P("\tVSUBPS  %s, X8, X8", mins)
		P("\tVADDPS  X8, X%d, X%d", g, g)
		P("")
	}
	T(`	XCHGQ DI, R13

	ADDQ $144, DI
	ADDQ $144, R13
	ADDQ $ACT_BLOCK, SI
	DECQ nb+32(FP)
	JNZ  q4kYLoop

	MOVQ out+40(FP), DX
	VMOVUPS X0, (DX)
	VMOVUPS X1, 16(DX)
	VZEROUPPER
	RET
`)
}

// kqYData are kqQ4KDot8VNNIY's constants.
const kqYData = `
// VPSHUFB indices putting scale byte j of each row's 128-bit lane of the
// K4_SCALES4 bytes (sc0..sc7, m0..m7) into both words of dword j
// (kqK4ScW0: sc0..sc3, kqK4ScW1: sc4..sc7).
LANE4(kqK4ScW0, 0x8001800180008000, 0x8003800380028002)
LANE4(kqK4ScW1, 0x8005800580048004, 0x8007800780068006)

`

// kqYMacros are kqQ4KDot8VNNIY's macros, written before the first TEXT
// (go vet's frame check takes a macro's SP offsets as the enclosing
// function's).
const kqYMacros = `// The four rows' scales as word pairs on the frame at off: row k's
// sc0..sc3 at off+16k, sc4..sc7 at off+64+16k. Uses Z2, Z3.
#define K4_SCW(off) \
	VPSHUFB   Z26, Z31, Z2 \
	VPSHUFB   Z30, Z31, Z3 \
	VMOVDQU64 Z2, off(SP) \
	VMOVDQU64 Z3, (off+64)(SP)

// Chunk c (32 bytes of nibbles: sub-blocks 2c, 2c+1) of the row at BX
// against the activation halves alo, ahi into acc (low nibbles) and acc2
// (high: two chains of multiply-adds, not one), the scales from the
// frame at slo, shi. Uses Y2, Y3.
#define Q4K_CHUNKY(c, alo, ahi, slo, shi, acc, acc2) \
	VPSRLW        $4, (16+32*c)(BX), Y3 \
	VPANDD        (16+32*c)(BX), Y24, Y2 \
	VPANDD        Y24, Y3, Y3 \
	VPMADDUBSW    alo, Y2, Y2 \
	VPMADDUBSW    ahi, Y3, Y3 \
	VPDPWSSD.BCST slo(SP), Y2, acc \
	VPDPWSSD.BCST shi(SP), Y3, acc2

`
