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
	kqDotY(false)
	P("")
	kqDotY(true)
}

// q5kBitShift are the shifts that bring bit 2c (lo) and 2c+1 (hi) of the
// qh bytes to bit 4, chunk c's fifth value bit (Q5K_CHUNK's).
var q5kBitShift = [4][2]struct {
	op string
	n  int
}{
	{{"VPSLLW", 4}, {"VPSLLW", 3}}, {{"VPSLLW", 2}, {"VPSLLW", 1}},
	{{"", 0}, {"VPSRLW", 1}}, {{"VPSRLW", 2}, {"VPSRLW", 3}},
}

// kqDotY writes kqQ4KDot8VNNIY or, with q5, kqQ5KDot8VNNIY: Q5_K's
// scales, mins and float arithmetic are Q4_K's (K4_FINISH); its values
// take a fifth bit from the 32 qh bytes (Y6), moved to bit 4 and or'ed
// in (VPTERNLOGD, Y7 = 0x10 bytes).
func kqDotY(q5 bool) {
	kind, pfx, wb, qs := "Q4K", "q4k", 144, 16
	if q5 {
		kind, pfx, wb, qs = "Q5K", "q5k", 176, 48
	}
	name := "kq" + kind + "Dot8VNNIY"
	P("// func %s%s", name, kqSig)
	P("//")
	if q5 {
		T(`// kqQ4KDot8VNNIY for Q5_K (the weight blocks 176 bytes, the nibbles at
// 48, the fifth bits at 16); its float arithmetic is kqQ5KDot4VNNI's
// (K4_FINISH), so its results are the same bits.
`)
	} else {
		T(`// kqQ4KDot8VNNIZ on 256-bit vectors (see kqYData, kqYMacros); each row's integer
// sums are exact whatever their order and the float arithmetic is
// kqQ4KDot8VNNIZ's, so its results are the same bits.
`)
	}
	P("TEXT ·%s(SB), NOSPLIT, $256-48", name)
	P("\tMOVQ w+0(FP), DI")
	P("\tMOVQ ws+8(FP), R8")
	P("\tPF_DIST(%sYpf)", pfx)
	T(`	MOVQ a+16(FP), SI
	XORQ R9, R9
	XORQ R11, R11
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R13
	VPBROADCASTB kqMask0F<>(SB), Z24
	VMOVDQU64 kqK4ScW0<>(SB), Z26
	VMOVDQU64 kqK4ScW1<>(SB), Z30
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
`)
	if q5 {
		P("\tVPBROADCASTB kqMask10<>(SB), Y7")
	}
	P("")
	P("%sYLoop:", pfx)
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
			if q5 {
				P("\tVMOVDQU 16(BX), Y6")
			}
			for c := range 4 {
				sc := 128*g + 16*k + 8*(c%2) + 64*(c/2)
				if !q5 {
					P("\tQ4K_CHUNKY(%d, Y%d, Y%d, %d, %d, Y%d, Y%d)", c, 16+2*c, 17+2*c, sc, sc+4, 8+k, kqYAcc2[k])
					continue
				}
				// Q5K_CHUNKY, the fifth bits or'ed in between.
				P("\tVPSRLW        $4, %d(BX), Y3", qs+32*c)
				P("\tVPANDD        %d(BX), Y24, Y2", qs+32*c)
				P("\tVPANDD        Y24, Y3, Y3")
				lo, hi := q5kBitShift[c][0], q5kBitShift[c][1]
				bit := "Y6"
				if lo.op != "" {
					P("\t%-13s $%d, Y6, Y5", lo.op, lo.n)
					bit = "Y5"
				}
				P("\tVPTERNLOGD    $0xf8, Y7, %s, Y2", bit)
				P("\t%-13s $%d, Y6, Y25", hi.op, hi.n)
				P("\tVPTERNLOGD    $0xf8, Y7, Y25, Y3")
				P("\tVPMADDUBSW    Y%d, Y2, Y2", 16+2*c)
				P("\tVPMADDUBSW    Y%d, Y3, Y3", 17+2*c)
				P("\tVPDPWSSD.BCST %d(SP), Y2, Y%d", sc, 8+k)
				P("\tVPDPWSSD.BCST %d(SP), Y3, Y%d", sc+4, kqYAcc2[k])
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
	P("\tXCHGQ DI, R13")
	P("")
	P("\tADDQ $%d, DI", wb)
	P("\tADDQ $%d, R13", wb)
	P("\tADDQ $ACT_BLOCK, SI")
	P("\tDECQ nb+32(FP)")
	P("\tJNZ  %sYLoop", pfx)
	T(`
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
