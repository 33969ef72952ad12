// Command neongen writes kernels_arm64.s, the arm64 NEON kernels of
// engine/ml: the integer products of the quantized types, the F32/F16
// row dots, the F32 and F16 axpy (the f16 attention's accumulation), the
// Q8_0 KV attention, Add, the Q8 and Q8_K activation quantizers and
// SiLU·mul.
// Every integer kernel comes in two variants that differ only in the int8
// dot step: SDOT (the dot-product extension, ARMv8.2 FEAT_DotProd) or
// SMULL/SMULL2/SADALP (plain ARMv8.0 NEON). The Go assembler lacks these
// and many other vector instructions (SCVTF, FCVTL, FMUL, SQXTN, ...), so
// they are written as WORDs with the mnemonic in a comment; the encoders
// below are checked against llvm-mc in TestNEONEncodings (main_test.go).
//
// Run it through go generate in engine/ml (see neongen.go):
//
//	go run ./internal/gen/neongen [-o kernels_arm64.s]
//
// TestNEONKernelsGenerated (engine/ml) regenerates into a temporary file
// and requires it to match the committed one byte for byte.
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"strings"
)

var out strings.Builder

// P writes one line (fmt.Sprintf of its arguments when there are any).
func P(format string, args ...any) {
	if len(args) > 0 {
		format = fmt.Sprintf(format, args...)
	}
	out.WriteString(format)
	out.WriteByte('\n')
}

func main() {
	o := flag.String("o", "kernels_arm64.s", "output file")
	flag.Parse()
	generate()
	if err := os.WriteFile(*o, []byte(out.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

// Encoders of the instructions the Go assembler lacks (register numbers
// are V registers).
func sdot(d, n, m int) uint32   { return 0x4E809400 | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
func smull(d, n, m int) uint32  { return 0x0E20C000 | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
func smull2(d, n, m int) uint32 { return 0x4E20C000 | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
func sadalp(d, n int) uint32    { return 0x4E606800 | uint32(n)<<5 | uint32(d) }
func scvtfS(d, n int) uint32    { return 0x5E21D800 | uint32(n)<<5 | uint32(d) }
func fadd4s(d, n, m int) uint32 { return 0x4E20D400 | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
func faddp4s(d, n, m int) uint32 {
	return 0x6E20D400 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)
}
func faddpS(d, n int) uint32 { return 0x7E30D800 | uint32(n)<<5 | uint32(d) }
func r3(op uint32) func(d, n, m int) uint32 {
	return func(d, n, m int) uint32 { return op | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
}
func r2(op uint32) func(d, n int) uint32 {
	return func(d, n int) uint32 { return op | uint32(n)<<5 | uint32(d) }
}

var (
	fabs4s     = r2(0x4EA0F800)
	fmax4s     = r3(0x4E20F400)
	fmaxvS     = r2(0x6E30F800)
	fmul4s     = r3(0x6E20DC00)
	fcvtns4s   = r2(0x4E21A800)
	sqxtn4h    = r2(0x0E614800)
	sqxtn2_8h  = r2(0x4E614800)
	sqxtn8b    = r2(0x0E214800)
	sqxtn2_16b = r2(0x4E214800)
	saddlp8h   = r2(0x4E202800)
	saddlvS    = r2(0x4E703800)
	fmaxnm4s   = r3(0x4E20C400)
	fminnm4s   = r3(0x4EA0C400)
	fmaxnmvS   = r2(0x6E30C800)
	fminnmvS   = r2(0x6EB0C800)
	smin4s     = r3(0x4EA06C00)
	xtn4h      = r2(0x0E612800)
	xtn2_8h    = r2(0x4E612800)
	xtn8b      = r2(0x0E212800)
	xtn2_16b   = r2(0x4E212800)
	fneg4s     = r2(0x6EA0F800)
	fcmlt0     = r2(0x4EA0E800)
	fcvtzs4s   = r2(0x4EA1B800)
	scvtf4s    = r2(0x4E21D800)
	sshr4s1    = r2(0x4F3F0400)
	fcmgt4s    = r3(0x6EA0E400)
	fcmeq4s    = r3(0x4E20E400)
	fdiv4s     = r3(0x6E20FC00)
	mul4s      = r3(0x4EA09C00)
	mla4s      = r3(0x4EA09400)
	saddlp4s   = r2(0x4E602800)
	sshll8h    = r2(0x0F08A400)
	sshll2_8h  = r2(0x4F08A400)
	sshll4s    = r2(0x0F10A400)
	sshll2_4s  = r2(0x4F10A400)
	ushl8h     = r3(0x6E604400)
	cmeq0_8h   = r2(0x4E609800)
	bic16b     = r3(0x4E601C00)
	facgt4s    = r3(0x6EA0EC00)
)

func fcvtSH(d, n int) uint32 { return 0x1EE24000 | uint32(n)<<5 | uint32(d) }
func fcvtl(d, n int) uint32  { return 0x0E217800 | uint32(n)<<5 | uint32(d) }
func fcvtl2(d, n int) uint32 { return 0x4E217800 | uint32(n)<<5 | uint32(d) }

// encodings lists every encoder with its mnemonic for one register
// choice, for the test against an assembler.
func encodings() map[string]uint32 {
	return map[string]uint32{
		"sdot v1.4s, v2.16b, v3.16b":    sdot(1, 2, 3),
		"smull v4.8h, v5.8b, v6.8b":     smull(4, 5, 6),
		"smull2 v7.8h, v8.16b, v9.16b":  smull2(7, 8, 9),
		"sadalp v10.4s, v11.8h":         sadalp(10, 11),
		"scvtf s12, s13":                scvtfS(12, 13),
		"fadd v14.4s, v15.4s, v16.4s":   fadd4s(14, 15, 16),
		"faddp v17.4s, v18.4s, v19.4s":  faddp4s(17, 18, 19),
		"faddp s20, v21.2s":             faddpS(20, 21),
		"fcvtl v22.4s, v23.4h":          fcvtl(22, 23),
		"fcvt s3, h4":                   fcvtSH(3, 4),
		"sshll v5.8h, v6.8b, #0":        sshll8h(5, 6),
		"sshll2 v7.8h, v8.16b, #0":      sshll2_8h(7, 8),
		"sshll v9.4s, v10.4h, #0":       sshll4s(9, 10),
		"sshll2 v11.4s, v12.8h, #0":     sshll2_4s(11, 12),
		"scvtf v13.4s, v14.4s":          scvtf4s(13, 14),
		"fcvtl2 v24.4s, v25.8h":         fcvtl2(24, 25),
		"fabs v1.4s, v2.4s":             fabs4s(1, 2),
		"fmax v3.4s, v4.4s, v5.4s":      fmax4s(3, 4, 5),
		"fmaxv s6, v7.4s":               fmaxvS(6, 7),
		"fmul v8.4s, v9.4s, v10.4s":     fmul4s(8, 9, 10),
		"fcvtns v11.4s, v12.4s":         fcvtns4s(11, 12),
		"sqxtn v13.4h, v14.4s":          sqxtn4h(13, 14),
		"sqxtn2 v15.8h, v16.4s":         sqxtn2_8h(15, 16),
		"sqxtn v17.8b, v18.8h":          sqxtn8b(17, 18),
		"sqxtn2 v19.16b, v20.8h":        sqxtn2_16b(19, 20),
		"saddlp v21.8h, v22.16b":        saddlp8h(21, 22),
		"saddlv s23, v24.8h":            saddlvS(23, 24),
		"fmaxnm v25.4s, v26.4s, v27.4s": fmaxnm4s(25, 26, 27),
		"fminnm v28.4s, v29.4s, v30.4s": fminnm4s(28, 29, 30),
		"fmaxnmv s31, v0.4s":            fmaxnmvS(31, 0),
		"fminnmv s1, v2.4s":             fminnmvS(1, 2),
		"cmeq v8.8h, v9.8h, #0":         cmeq0_8h(8, 9),
		"bic v4.16b, v5.16b, v6.16b":    bic16b(4, 5, 6),
		"facgt v10.4s, v29.4s, v16.4s":  facgt4s(10, 29, 16),
	}
}

// dotter emits acc.4S += the int8 dot of w.16B and q.16B in groups of
// four lanes (so the four lanes of acc sum to the 16-value dot product).
type dotter struct {
	name string
	emit func(acc, w, q int)
}

// Scratch registers of the SMULL variant.
const t1, t2 = 7, 26

var dotters = []dotter{
	{"SDOT", func(acc, w, q int) {
		P("\tWORD $0x%08X // SDOT V%d.4S, V%d.16B, V%d.16B", sdot(acc, w, q), acc, w, q)
	}},
	{"NEON", func(acc, w, q int) {
		P("\tWORD $0x%08X // SMULL V%d.8H, V%d.8B, V%d.8B", smull(t1, w, q), t1, w, q)
		P("\tWORD $0x%08X // SMULL2 V%d.8H, V%d.16B, V%d.16B", smull2(t2, w, q), t2, w, q)
		P("\tWORD $0x%08X // SADALP V%d.4S, V%d.8H", sadalp(acc, t1), acc, t1)
		P("\tWORD $0x%08X // SADALP V%d.4S, V%d.8H", sadalp(acc, t2), acc, t2)
	}},
}

func zero(v ...int) {
	for _, r := range v {
		P("\tVEOR V%d.B16, V%d.B16, V%d.B16", r, r, r)
	}
}

// reduce4 leaves in a the four int32 sums of the lanes of a, b, c, d.
func reduce4(a, b, c, d int) {
	P("\tVADDP V%d.S4, V%d.S4, V%d.S4", b, a, a)
	P("\tVADDP V%d.S4, V%d.S4, V%d.S4", d, c, c)
	P("\tVADDP V%d.S4, V%d.S4, V%d.S4", c, a, a)
}

func generate() {
	P("// Code generated by neongen (go generate in engine/ml). DO NOT EDIT.")
	P("")
	P("//go:build arm64 && !purego")
	P("")
	P("#include \"textflag.h\"")
	for _, d := range dotters {
		for _, t := range q32Types {
			q32(d, t)
		}
		q4k(d, false)
		q4k(d, true)
		q6k(d)
		q2k(d)
		q3k(d)
		iq4xs(d)
		for _, t := range q32Types {
			if t.min < 0 && t.ty != "MXFP4" {
				q32x4(d, t)
			}
		}
	}
	dotF32("F32")
	dotF32("F16")
	axpyF32("F32")
	axpyF32("F16")
	attnQ8()
	addF32()
	quantQ8()
	maxMin()
	quantQ8K()
	siluMul()
	bf16Lanes()
}

// bf16Lanes writes func bf16LanesNEON(x, w *byte, ws, nc int, lanes
// *float32, nw int), the NEON emulation of VDPBF16PS in dotBF16Ref's
// order: for each of nw weight rows (ws bytes apart) the 16 f32 lanes of
// the first nc whole 32-value chunks of the bf16 rows x and w, stored at
// lanes+64*row (bf16FinishLanes finishes them). Lane j of chunk c is the
// 32-bit word 16c+j of each row: its high half (the odd element) is the
// word with the low half cleared, its low half (the even one) the word
// shifted left 16, so the lanes need no shuffle. The FMAs flush as x86's
// FTZ does (see fmaFTZ), which detects tininess after rounding: FPCR.FZ
// detects it before, and an FMLA with gradual underflow followed by a
// flush of subnormal results keeps 2^-126 for sums a little below it.
// So each FMLA is done twice, as is and scaled by 2^32 (the activation
// and the accumulator, each exactly unless it overflows, which a tiny sum
// cannot need), and the result is flushed to a zero of its sign where the
// scaled one is below 2^-94 (FACGT; the mask shifted right one to spare
// the sign; BIC). Subnormal weights are flushed on loading (bf16 lanes
// with a zero exponent lose all but their sign); activations never are
// subnormal (roundBF16).
func bf16Lanes() {
	P("")
	P("// func bf16LanesNEON(x *byte, w *byte, ws int, nc int, lanes *float32, nw int)")
	P("TEXT ·bf16LanesNEON(SB), NOSPLIT, $0-48")
	P("\tMOVD x+0(FP), R0")
	P("\tMOVD w+8(FP), R1")
	P("\tMOVD ws+16(FP), R2")
	P("\tMOVD nc+24(FP), R3")
	P("\tMOVD lanes+32(FP), R4")
	P("\tMOVD nw+40(FP), R5")
	P("\tMOVW $0xFFFF0000, R6")
	P("\tVDUP R6, V30.S4") // the odd elements' mask
	P("\tMOVW $0x10800000, R6")
	P("\tVDUP R6, V29.S4") // 2^-94, the smallest normal f32 times 2^32
	P("\tMOVW $0x4F800000, R6")
	P("\tVDUP R6, V31.S4") // 2^32
	P("\tMOVW $0x7F80, R6")
	P("\tVDUP R6, V28.H8") // a bf16's exponent
	P("\tCBZ R5, done")
	P("row:")
	zero(16, 17, 18, 19)
	P("\tMOVD R0, R6")
	P("\tMOVD R1, R7")
	P("\tMOVD R3, R8")
	P("\tCBZ R8, store")
	P("chunk:")
	P("\tVLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]")
	P("\tVLD1.P 64(R7), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 4; i < 8; i++ {
		// Subnormal weights to a zero of their sign.
		t := 8 + i
		P("\tVAND V28.B16, V%d.B16, V%d.B16", i, t)
		W(cmeq0_8h(t, t), "CMEQ V%d.8H, V%d.8H, #0", t, t)
		P("\tVUSHR $1, V%d.H8, V%d.H8", t, t)
		W(bic16b(i, i, t), "BIC V%d.16B, V%d.16B, V%d.16B", i, i, t)
	}
	// The odd elements to V8-V11 (x) and V12-V15 (w), the even ones in
	// place; then the four accumulators' chains side by side.
	for q := 0; q < 4; q++ {
		P("\tVAND V30.B16, V%d.B16, V%d.B16", q, 8+q)
		P("\tVAND V30.B16, V%d.B16, V%d.B16", 4+q, 12+q)
		P("\tVSHL $16, V%d.S4, V%d.S4", q, q)
		P("\tVSHL $16, V%d.S4, V%d.S4", 4+q, 4+q)
	}
	for _, x := range []int{8, 0} { // odd, then even
		// The scaled sum r' = fma(x*2^32, w, acc*2^32): its rounding is
		// the unbounded-exponent one wherever acc + x*w is tiny.
		for q := 0; q < 4; q++ {
			W(fmul4s(20+q, 16+q, 31), "FMUL V%d.4S, V%d.4S, V31.4S", 20+q, 16+q)
			W(fmul4s(24+q, x+q, 31), "FMUL V%d.4S, V%d.4S, V31.4S", 24+q, x+q)
		}
		for q := 0; q < 4; q++ {
			P("\tVFMLA V%d.S4, V%d.S4, V%d.S4", x+4+q, 24+q, 20+q)
			P("\tVFMLA V%d.S4, V%d.S4, V%d.S4", x+4+q, x+q, 16+q)
		}
		for q := 0; q < 4; q++ {
			W(facgt4s(20+q, 29, 20+q), "FACGT V%d.4S, V29.4S, V%d.4S", 20+q, 20+q)
		}
		for q := 0; q < 4; q++ {
			P("\tVUSHR $1, V%d.S4, V%d.S4", 20+q, 20+q)
		}
		for q := 0; q < 4; q++ {
			W(bic16b(16+q, 16+q, 20+q), "BIC V%d.16B, V%d.16B, V%d.16B", 16+q, 16+q, 20+q)
		}
	}
	P("\tSUBS $1, R8")
	P("\tBNE chunk")
	P("store:")
	P("\tVST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R4)")
	P("\tADD R2, R1")
	P("\tSUBS $1, R5")
	P("\tBNE row")
	P("done:")
	P("\tRET")
}

// siluMul writes func siluMulNEON(gate, up *float32, n4 int): gate =
// gate*(1/(1+expf(-gate)))*up, four lanes at a time, n4 a positive
// multiple of 4. It follows engine/ml's expf step for step as the Go
// compiler builds it for arm64, where it fuses every multiply-add of the
// rounding offset, the Cody-Waite reduction and the polynomial (FMADD,
// FMSUB): FMLA/FMLS here. The scale 2^k is always applied in two halves
// (p*2^(k/2))*2^(k-k/2), the first product exact, which equals expf's
// single p*2^k wherever expf does that.
func siluMul() {
	f := func(v float64) uint32 { return math.Float32bits(float32(v)) }
	consts := []struct {
		reg  int
		bits uint32
		what string
	}{
		{16, f(1.44269504088896341), "log2e"},
		{17, f(0.5), "0.5"},
		{18, f(-0.5), "-0.5"},
		{19, f(0.693145751953125), "ln2hi"},
		{20, f(1.42860682030941723212e-6), "ln2lo"},
		{21, f(1.0 / 720), "1/720"},
		{22, f(1.0 / 120), "1/120"},
		{23, f(1.0 / 24), "1/24"},
		{24, f(1.0 / 6), "1/6"},
		{25, f(1), "1"},
		{26, f(88.72283), "exp overflows above"},
		{27, f(-87.33654), "exp is 0 below"},
		{28, 0x7F800000, "+Inf"},
		{29, 127, "the exponent bias (int32)"},
	}
	P("")
	P("// func siluMulNEON(gate, up *float32, n4 int)")
	P("TEXT ·siluMulNEON(SB), NOSPLIT, $0-24")
	P("\tMOVD gate+0(FP), R0")
	P("\tMOVD up+8(FP), R1")
	P("\tMOVD n4+16(FP), R2")
	for _, c := range consts {
		P("\tMOVW $0x%08X, R3 // %s", c.bits, c.what)
		P("\tVDUP R3, V%d.S4", c.reg)
	}
	zero(30)
	P("loop:")
	P("\tVLD1 (R0), [V0.S4]")
	P("\tVLD1.P 16(R1), [V1.S4]")
	W(fneg4s(2, 0), "FNEG V2.4S, V0.4S") // x = -g
	// kf = x*log2e -+ 0.5 by the sign of x*log2e, fused.
	W(fmul4s(3, 2, 16), "FMUL V3.4S, V2.4S, V16.4S")
	W(fcmlt0(5, 3), "FCMLT V5.4S, V3.4S, #0.0")
	P("\tVBSL V17.B16, V18.B16, V5.B16")
	P("\tVFMLA V16.S4, V2.S4, V5.S4")
	W(fcvtzs4s(6, 5), "FCVTZS V6.4S, V5.4S") // k
	W(scvtf4s(7, 6), "SCVTF V7.4S, V6.4S")   // fk
	// r = x - fk*ln2hi - fk*ln2lo, each step fused.
	P("\tVORR V2.B16, V2.B16, V8.B16")
	P("\tVFMLS V19.S4, V7.S4, V8.S4")
	P("\tVFMLS V20.S4, V7.S4, V8.S4")
	// p = 1 + r*(1 + r*(0.5 + r*(1/6 + r*(1/24 + r*(1/120 + r/720))))).
	t, u := 9, 10
	for _, c := range []int{22, 23, 24, 17, 25, 25} {
		P("\tVORR V%d.B16, V%d.B16, V%d.B16", c, c, t)
		if c == 22 {
			P("\tVFMLA V21.S4, V8.S4, V%d.S4", t)
		} else {
			P("\tVFMLA V%d.S4, V8.S4, V%d.S4", u, t)
		}
		t, u = u, t
	}
	// p is in V(u). Scale by 2^half * 2^(k-half), half = k/2 (truncated).
	P("\tVUSHR $31, V6.S4, V11.S4")
	P("\tVADD V11.S4, V6.S4, V11.S4")
	W(sshr4s1(11, 11), "SSHR V11.4S, V11.4S, #1")
	P("\tVSUB V11.S4, V6.S4, V12.S4")
	P("\tVADD V29.S4, V11.S4, V11.S4")
	P("\tVSHL $23, V11.S4, V11.S4")
	P("\tVADD V29.S4, V12.S4, V12.S4")
	P("\tVSHL $23, V12.S4, V12.S4")
	W(fmul4s(u, 11, u), "FMUL V%d.4S, V11.4S, V%d.4S", u, u)
	W(fmul4s(u, u, 12), "FMUL V%d.4S, V%d.4S, V12.4S", u, u)
	// expf's special cases: +Inf above, 0 below, x itself for NaN.
	W(fcmgt4s(13, 2, 26), "FCMGT V13.4S, V2.4S, V26.4S")
	P("\tVBIT V13.B16, V28.B16, V%d.B16", u)
	W(fcmgt4s(13, 27, 2), "FCMGT V13.4S, V27.4S, V2.4S")
	P("\tVBIT V13.B16, V30.B16, V%d.B16", u)
	W(fcmeq4s(13, 2, 2), "FCMEQ V13.4S, V2.4S, V2.4S")
	P("\tVBIF V13.B16, V2.B16, V%d.B16", u)
	// g * (1/(1+e)) * up
	W(fadd4s(14, 25, u), "FADD V14.4S, V25.4S, V%d.4S", u)
	W(fdiv4s(14, 25, 14), "FDIV V14.4S, V25.4S, V14.4S")
	W(fmul4s(14, 14, 0), "FMUL V14.4S, V14.4S, V0.4S")
	W(fmul4s(14, 14, 1), "FMUL V14.4S, V14.4S, V1.4S")
	P("\tVST1.P [V14.S4], 16(R0)")
	P("\tSUBS $4, R2")
	P("\tBNE loop")
	P("\tRET")
}

// W writes one WORD-encoded instruction with its mnemonic.
func W(enc uint32, format string, args ...any) {
	P("\tWORD $0x%08X // %s", enc, fmt.Sprintf(format, args...))
}

// narrow16 leaves in byte vector o the four int32 vectors v..v+3
// saturated to int8, through int16 vectors t and t+1.
func narrow16(o, v, t int) {
	W(sqxtn4h(t, v), "SQXTN V%d.4H, V%d.4S", t, v)
	W(sqxtn2_8h(t, v+1), "SQXTN2 V%d.8H, V%d.4S", t, v+1)
	W(sqxtn4h(t+1, v+2), "SQXTN V%d.4H, V%d.4S", t+1, v+2)
	W(sqxtn2_8h(t+1, v+3), "SQXTN2 V%d.8H, V%d.4S", t+1, v+3)
	W(sqxtn8b(o, t), "SQXTN V%d.8B, V%d.8H", o, t)
	W(sqxtn2_16b(o, t+1), "SQXTN2 V%d.16B, V%d.8H", o, t+1)
}

// truncate16 is narrow16 keeping the low bytes (Go's byte(int8(q))).
func truncate16(o, v, t int) {
	W(xtn4h(t, v), "XTN V%d.4H, V%d.4S", t, v)
	W(xtn2_8h(t, v+1), "XTN2 V%d.8H, V%d.4S", t, v+1)
	W(xtn4h(t+1, v+2), "XTN V%d.4H, V%d.4S", t+1, v+2)
	W(xtn2_8h(t+1, v+3), "XTN2 V%d.8H, V%d.4S", t+1, v+3)
	W(xtn8b(o, t), "XTN V%d.8B, V%d.8H", o, t)
	W(xtn2_16b(o, t+1), "XTN2 V%d.16B, V%d.8H", o, t+1)
}

// scaleRound sets the int32 vectors v..v+3 to the nearest-even integers
// (saturated) of their f32 values times the vector s, each product
// rounded to f32 first.
func scaleRound(v, s int) {
	for i := v; i < v+4; i++ {
		W(fmul4s(i, i, s), "FMUL V%d.4S, V%d.4S, V%d.4S", i, i, s)
	}
	for i := v; i < v+4; i++ {
		W(fcvtns4s(i, i), "FCVTNS V%d.4S, V%d.4S", i, i)
	}
}

// quantQ8 writes func quantQ8NEON(dst *byte, x *float32, nb int): the
// Q8 activation blocks of quantizeActQ8Generic (d = max|x|/127 with NaN
// propagating as Go's max does, q = roundeven(x*(1/d)) clamped to int8,
// the bias -128*sum(q)). A zero d gives 1/d = +Inf and x*Inf = NaN for
// the block's zeros, which FCVTNS turns into 0, the generic q.
func quantQ8() {
	P("")
	P("// func quantQ8NEON(dst *byte, x *float32, nb int)")
	P("TEXT ·quantQ8NEON(SB), NOSPLIT, $0-24")
	P("\tMOVD dst+0(FP), R0")
	P("\tMOVD x+8(FP), R1")
	P("\tMOVD nb+16(FP), R2")
	P("\tFMOVS $127.0, F30")
	P("\tFMOVS $1.0, F29")
	P("\tCBZ R2, done")
	P("loop:")
	P("\tVLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
	P("\tVLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 8; i++ {
		W(fabs4s(16+i, i), "FABS V%d.4S, V%d.4S", 16+i, i)
	}
	for _, p := range [][2]int{{16, 17}, {18, 19}, {20, 21}, {22, 23}, {16, 18}, {20, 22}, {16, 20}} {
		W(fmax4s(p[0], p[0], p[1]), "FMAX V%d.4S, V%d.4S, V%d.4S", p[0], p[0], p[1])
	}
	W(fmaxvS(16, 16), "FMAXV S16, V16.4S")
	P("\tFDIVS F30, F16, F17") // d = amax/127
	P("\tFDIVS F17, F29, F18") // id = 1/d
	P("\tVDUP V18.S[0], V18.S4")
	scaleRound(0, 18)
	scaleRound(4, 18)
	narrow16(20, 0, 24)
	narrow16(21, 4, 24)
	W(saddlp8h(22, 20), "SADDLP V22.8H, V20.16B")
	W(saddlp8h(23, 21), "SADDLP V23.8H, V21.16B")
	P("\tVADD V23.H8, V22.H8, V22.H8")
	W(saddlvS(22, 22), "SADDLV S22, V22.8H")
	P("\tFMOVS F22, R5")
	P("\tNEGW R5, R5")
	P("\tLSLW $7, R5, R5")
	P("\tFMOVS F17, (R0)")
	P("\tMOVW R5, 4(R0)")
	P("\tADD $8, R0, R6")
	P("\tVST1 [V20.B16, V21.B16], (R6)")
	P("\tADD $40, R0")
	P("\tSUBS $1, R2")
	P("\tBNE loop")
	P("done:")
	P("\tRET")
}

// maxMin writes func maxMinNEON(x *float32, n16 int) (hi, lo float32):
// the largest and smallest of x ignoring NaNs (FMAXNM, FMINNM; NaN only
// when all are), n16 a positive multiple of 16.
func maxMin() {
	P("")
	P("// func maxMinNEON(x *float32, n16 int) (hi, lo float32)")
	P("TEXT ·maxMinNEON(SB), NOSPLIT, $0-24")
	P("\tMOVD x+0(FP), R0")
	P("\tMOVD n16+8(FP), R1")
	P("\tVLD1.P 64(R0), [V16.S4, V17.S4, V18.S4, V19.S4]")
	for i := 0; i < 4; i++ {
		P("\tVORR V%d.B16, V%d.B16, V%d.B16", 16+i, 16+i, 20+i)
	}
	P("\tSUBS $16, R1")
	P("\tBEQ done")
	P("loop:")
	P("\tVLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	for i := 0; i < 4; i++ {
		W(fmaxnm4s(16+i, 16+i, i), "FMAXNM V%d.4S, V%d.4S, V%d.4S", 16+i, 16+i, i)
		W(fminnm4s(20+i, 20+i, i), "FMINNM V%d.4S, V%d.4S, V%d.4S", 20+i, 20+i, i)
	}
	P("\tSUBS $16, R1")
	P("\tBNE loop")
	P("done:")
	for _, p := range [][2]int{{16, 17}, {18, 19}, {16, 18}} {
		W(fmaxnm4s(p[0], p[0], p[1]), "FMAXNM V%d.4S, V%d.4S, V%d.4S", p[0], p[0], p[1])
		W(fminnm4s(p[0]+4, p[0]+4, p[1]+4), "FMINNM V%d.4S, V%d.4S, V%d.4S", p[0]+4, p[0]+4, p[1]+4)
	}
	W(fmaxnmvS(16, 16), "FMAXNMV S16, V16.4S")
	W(fminnmvS(20, 20), "FMINNMV S20, V20.4S")
	P("\tFMOVS F16, hi+16(FP)")
	P("\tFMOVS F20, lo+20(FP)")
	P("\tRET")
}

// quantQ8K writes func quantQ8KNEON(dst *byte, x *float32, iscale
// float32): one Q8_K block's 256 values as quantizeActQ8KGeneric's
// byte(int8(min(127, q))) with q = roundeven(iscale*x) saturated to int32
// (as Go converts on arm64), and its 16 sums of 16 at dst+260. The caller
// picks iscale and writes d.
func quantQ8K() {
	P("")
	P("// func quantQ8KNEON(dst *byte, x *float32, iscale float32)")
	P("TEXT ·quantQ8KNEON(SB), NOSPLIT, $0-20")
	P("\tMOVD dst+0(FP), R0")
	P("\tMOVD x+8(FP), R1")
	P("\tFMOVS iscale+16(FP), F31")
	P("\tVDUP V31.S[0], V31.S4")
	P("\tADD $260, R0, R2")
	P("\tMOVW $127, R3")
	P("\tVDUP R3, V30.S4")
	for half := 0; half < 2; half++ {
		for g := 0; g < 8; g++ {
			P("\tVLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
			scaleRound(0, 31)
			for i := 0; i < 4; i++ {
				W(smin4s(i, i, 30), "SMIN V%d.4S, V%d.4S, V30.4S", i, i)
			}
			truncate16(6, 0, 4)
			P("\tVST1.P [V6.B16], 16(R0)")
			W(saddlp8h(16+g, 6), "SADDLP V%d.8H, V6.16B", 16+g)
		}
		for _, p := range [][2]int{{16, 17}, {18, 19}, {20, 21}, {22, 23}, {16, 18}, {20, 22}, {16, 20}} {
			P("\tVADDP V%d.H8, V%d.H8, V%d.H8", p[1], p[0], p[0])
		}
		P("\tVST1.P [V16.H8], 16(R2)")
	}
	P("\tRET")
}

// dotF32 writes func dotF32NEON(a, b *float32, n16 int) float32 (or
// dotF16NEON with b f16 values, widened exactly): four accumulators of
// four lanes fed by FMLA, n16 a positive multiple of 16, then the same
// fixed reduction, so an F16 row gives the bits of its F32 decoding.
func dotF32(kind string) {
	name, bt := "dot"+kind+"NEON", "*uint16"
	if kind == "F32" {
		bt = "*float32"
	}
	P("")
	P("// func %s(a *float32, b %s, n16 int) float32", name, bt)
	P("TEXT ·%s(SB), NOSPLIT, $0-28", name)
	P("\tMOVD a+0(FP), R0")
	P("\tMOVD b+8(FP), R1")
	P("\tMOVD n16+16(FP), R2")
	zero(16, 17, 18, 19)
	P("loop:")
	P("\tVLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	switch kind {
	case "F16":
		P("\tVLD1.P 32(R1), [V8.H8, V9.H8]")
		P("\tWORD $0x%08X // FCVTL V4.4S, V8.4H", fcvtl(4, 8))
		P("\tWORD $0x%08X // FCVTL2 V5.4S, V8.8H", fcvtl2(5, 8))
		P("\tWORD $0x%08X // FCVTL V6.4S, V9.4H", fcvtl(6, 9))
		P("\tWORD $0x%08X // FCVTL2 V7.4S, V9.8H", fcvtl2(7, 9))
	default:
		P("\tVLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	}
	for i := 0; i < 4; i++ {
		P("\tVFMLA V%d.S4, V%d.S4, V%d.S4", 4+i, i, 16+i)
	}
	P("\tSUBS $16, R2")
	P("\tBGT loop")
	P("\tWORD $0x%08X // FADD V16.4S, V16.4S, V17.4S", fadd4s(16, 16, 17))
	P("\tWORD $0x%08X // FADD V18.4S, V18.4S, V19.4S", fadd4s(18, 18, 19))
	P("\tWORD $0x%08X // FADD V16.4S, V16.4S, V18.4S", fadd4s(16, 16, 18))
	P("\tWORD $0x%08X // FADDP V16.4S, V16.4S, V16.4S", faddp4s(16, 16, 16))
	P("\tWORD $0x%08X // FADDP S16, V16.2S", faddpS(16, 16))
	P("\tFMOVS F16, ret+24(FP)")
	P("\tRET")
}

// axpyF32 writes func axpyF32NEON(dst *float32, a float32, x *float32,
// n16 int) (or axpyF16NEON with x f16 values, widened exactly): dst +=
// a*x with FMLA, n16 a positive multiple of 16. The multiply-add is fused
// as Go's own dst[i] += a*x[i] is on arm64, so an F16 row accumulates the
// bits of its F32 decoding.
func axpyF32(kind string) {
	name, xt := "axpy"+kind+"NEON", "*uint16"
	if kind == "F32" {
		xt = "*float32"
	}
	P("")
	P("// func %s(dst *float32, a float32, x %s, n16 int)", name, xt)
	P("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	P("\tMOVD dst+0(FP), R0")
	P("\tFMOVS a+8(FP), F31")
	P("\tMOVD x+16(FP), R1")
	P("\tMOVD n16+24(FP), R2")
	P("\tVDUP V31.S[0], V31.S4")
	P("loop:")
	P("\tVLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	if kind == "F16" {
		P("\tVLD1.P 32(R1), [V8.H8, V9.H8]")
		P("\tWORD $0x%08X // FCVTL V4.4S, V8.4H", fcvtl(4, 8))
		P("\tWORD $0x%08X // FCVTL2 V5.4S, V8.8H", fcvtl2(5, 8))
		P("\tWORD $0x%08X // FCVTL V6.4S, V9.4H", fcvtl(6, 9))
		P("\tWORD $0x%08X // FCVTL2 V7.4S, V9.8H", fcvtl2(7, 9))
	} else {
		P("\tVLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	}
	for i := 0; i < 4; i++ {
		P("\tVFMLA V31.S4, V%d.S4, V%d.S4", 4+i, i)
	}
	P("\tVST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)")
	P("\tSUBS $16, R2")
	P("\tBGT loop")
	P("\tRET")
}

// addF32 writes func addF32NEON(dst, x *float32, n16 int): dst += x,
// n16 a positive multiple of 16 (each sum rounded once, as addGeneric's).
func addF32() {
	P("")
	P("// func addF32NEON(dst, x *float32, n16 int)")
	P("TEXT ·addF32NEON(SB), NOSPLIT, $0-24")
	P("\tMOVD dst+0(FP), R0")
	P("\tMOVD x+8(FP), R1")
	P("\tMOVD n16+16(FP), R2")
	P("loop:")
	P("\tVLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	P("\tVLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 4; i++ {
		W(fadd4s(i, i, 4+i), "FADD V%d.4S, V%d.4S, V%d.4S", i, i, 4+i)
	}
	P("\tVST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)")
	P("\tSUBS $16, R2")
	P("\tBGT loop")
	P("\tRET")
}

// attnQ8 writes the Q8_0 KV attention kernels, which widen each block
// of a position's row (f16 scale d, 32 int8 q) in registers to the
// float32 values q*d (exact products, as dequantQ8Generic's) instead of
// through a tile:
//
//   - func dotQ8KVNEON(q *float32, kv *byte, nb int) float32: the dot of
//     q with the nb-block row, in dotF32NEON's accumulators and reduction,
//     so a score has the bits of dot on the dequantized row;
//   - func axpyQ8KVNEON(dst *float32, a float32, kv *byte, nb int): dst +=
//     a*row, fused as axpyF32NEON's.
func attnQ8() {
	// q8Block leaves the 32 values of the block at R1 in V0-V7, R1 past it.
	q8Block := func() {
		P("\tMOVHU.P 2(R1), R3")
		P("\tFMOVS R3, F10")
		W(fcvtSH(10, 10), "FCVT S10, H10")
		P("\tVDUP V10.S[0], V10.S4")
		P("\tVLD1.P 32(R1), [V8.B16, V9.B16]")
		W(sshll8h(20, 8), "SSHLL V20.8H, V8.8B, #0")
		W(sshll2_8h(21, 8), "SSHLL2 V21.8H, V8.16B, #0")
		W(sshll8h(22, 9), "SSHLL V22.8H, V9.8B, #0")
		W(sshll2_8h(23, 9), "SSHLL2 V23.8H, V9.16B, #0")
		for i := 0; i < 4; i++ {
			W(sshll4s(2*i, 20+i), "SSHLL V%d.4S, V%d.4H, #0", 2*i, 20+i)
			W(sshll2_4s(2*i+1, 20+i), "SSHLL2 V%d.4S, V%d.8H, #0", 2*i+1, 20+i)
		}
		for i := 0; i < 8; i++ {
			W(scvtf4s(i, i), "SCVTF V%d.4S, V%d.4S", i, i)
			W(fmul4s(i, i, 10), "FMUL V%d.4S, V%d.4S, V10.4S", i, i)
		}
	}

	P("")
	P("// func dotQ8KVNEON(q *float32, kv *byte, nb int) float32")
	P("TEXT ·dotQ8KVNEON(SB), NOSPLIT, $0-28")
	P("\tMOVD q+0(FP), R0")
	P("\tMOVD kv+8(FP), R1")
	P("\tMOVD nb+16(FP), R2")
	zero(16, 17, 18, 19)
	P("loop:")
	q8Block()
	for h := 0; h < 2; h++ {
		P("\tVLD1.P 64(R0), [V24.S4, V25.S4, V26.S4, V27.S4]")
		for i := 0; i < 4; i++ {
			P("\tVFMLA V%d.S4, V%d.S4, V%d.S4", 24+i, 4*h+i, 16+i)
		}
	}
	P("\tSUBS $1, R2")
	P("\tBGT loop")
	P("\tWORD $0x%08X // FADD V16.4S, V16.4S, V17.4S", fadd4s(16, 16, 17))
	P("\tWORD $0x%08X // FADD V18.4S, V18.4S, V19.4S", fadd4s(18, 18, 19))
	P("\tWORD $0x%08X // FADD V16.4S, V16.4S, V18.4S", fadd4s(16, 16, 18))
	P("\tWORD $0x%08X // FADDP V16.4S, V16.4S, V16.4S", faddp4s(16, 16, 16))
	P("\tWORD $0x%08X // FADDP S16, V16.2S", faddpS(16, 16))
	P("\tFMOVS F16, ret+24(FP)")
	P("\tRET")

	P("")
	P("// func axpyQ8KVNEON(dst *float32, a float32, kv *byte, nb int)")
	P("TEXT ·axpyQ8KVNEON(SB), NOSPLIT, $0-32")
	P("\tMOVD dst+0(FP), R0")
	P("\tFMOVS a+8(FP), F31")
	P("\tMOVD kv+16(FP), R1")
	P("\tMOVD nb+24(FP), R2")
	P("\tVDUP V31.S[0], V31.S4")
	P("loop:")
	q8Block()
	for h := 0; h < 2; h++ {
		P("\tVLD1 (R0), [V24.S4, V25.S4, V26.S4, V27.S4]")
		for i := 0; i < 4; i++ {
			P("\tVFMLA V31.S4, V%d.S4, V%d.S4", 4*h+i, 24+i)
		}
		P("\tVST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0)")
	}
	P("\tSUBS $1, R2")
	P("\tBGT loop")
	P("\tRET")
}

// q32x4 writes func dot<ty>x4<variant>(w, a *byte, as, nb int, tbl *int8,
// out *float32) for a type without offset or E8M0 scale: the products of
// one weight row with four Q8 activation rows (as bytes apart), each
// weight block loaded and decoded once for the four. The four rows' steps
// of q32's kernel run in the lanes of one vector (int sum, SCVTF,
// s*(dw*dx), acc + that, each rounded as there), so out[i] has the bits of
// the one-row kernel on row i.
//
// Registers: R0 w, R10-R13 the activation rows, R2 blocks left, V31 the
// four sums, V3 dw in every lane, V12 the four dx, V8-V11 the int sums.
func q32x4(d dotter, t q32Type) {
	name := "dot" + t.ty + "x4" + d.name
	P("")
	P("// func %s(w, a *byte, as, nb int, tbl *int8, out *float32)", name)
	P("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	P("\tMOVD w+0(FP), R0")
	P("\tMOVD a+8(FP), R10")
	P("\tMOVD as+16(FP), R9")
	P("\tMOVD nb+24(FP), R2")
	P("\tMOVD tbl+32(FP), R3")
	P("\tADD R9, R10, R11")
	P("\tADD R9, R11, R12")
	P("\tADD R9, R12, R13")
	zero(31)
	q32Setup(t)
	P("\tCBZ R2, done")
	P("loop:")
	P("\tMOVHU (R0), R4")
	P("\tFMOVS R4, F3")
	P("\tFCVTHS F3, F3")
	P("\tVDUP V3.S[0], V3.S4")
	P("\tADD $%d, R0, R5", t.qs)
	q32Decode(t)
	for i := 0; i < 4; i++ {
		r := 10 + i
		P("\tFMOVS (R%d), F%d", r, 12+i)
		P("\tADD $8, R%d, R6", r)
		P("\tVLD1 (R6), [V16.B16, V17.B16]")
		zero(8 + i)
		d.emit(8+i, 0, 16)
		d.emit(8+i, 1, 17)
		P("\tADD $40, R%d", r)
	}
	reduce4(8, 9, 10, 11)
	W(scvtf4s(8, 8), "SCVTF V8.4S, V8.4S")
	for i := 1; i < 4; i++ {
		P("\tVMOV V%d.S[0], V12.S[%d]", 12+i, i)
	}
	W(fmul4s(12, 12, 3), "FMUL V12.4S, V12.4S, V3.4S")
	W(fmul4s(8, 8, 12), "FMUL V8.4S, V8.4S, V12.4S")
	W(fadd4s(31, 31, 8), "FADD V31.4S, V31.4S, V8.4S")
	P("\tADD $%d, R0", t.bb)
	P("\tSUBS $1, R2")
	P("\tBNE loop")
	P("done:")
	P("\tMOVD out+40(FP), R7")
	P("\tVST1 [V31.S4], (R7)")
	P("\tRET")
}

// q32Setup loads the constants of q32Decode: V29 0x0f bytes, V28 the
// bias bytes, V27 the code book (from R3), and for the fifth bits V22-V25
// (R9 is clobbered).
func q32Setup(t q32Type) {
	P("\tVMOVI $15, V29.B16")
	if t.bias != "" {
		P("\tVMOVI $%s, V28.B16", t.bias)
	}
	if t.codes == "tbl" {
		P("\tVLD1 (R3), [V27.B16]")
	}
	if t.qh >= 0 {
		P("\tVMOVI $16, V22.B16")
		P("\tMOVD $0x8040201008040201, R9")
		P("\tVDUP R9, V25.D2")
		zero(24)
		P("\tMOVD $0x0101010101010101, R9")
		P("\tVMOV R9, V24.D[1]")
		P("\tMOVD $0x0202020202020202, R9")
		P("\tVMOV R9, V23.D[0]")
		P("\tMOVD $0x0303030303030303, R9")
		P("\tVMOV R9, V23.D[1]")
	}
}

// q32Decode leaves the 32 int8 values of the weight block (values at R5,
// fifth bits at qh(R0)) in V0 and V1 (V2, V6, V18, V19 and R8 scratch).
func q32Decode(t q32Type) {
	if t.ty == "Q8_0" {
		P("\tVLD1 (R5), [V0.B16, V1.B16]")
	} else {
		// Low nibbles are values 0..15, high nibbles 16..31.
		P("\tVLD1 (R5), [V2.B16]")
		P("\tVAND V29.B16, V2.B16, V0.B16")
		P("\tVUSHR $4, V2.B16, V1.B16")
		if t.qh >= 0 {
			// Bit j of qh becomes 16 in value j.
			P("\tMOVWU %d(R0), R8", t.qh)
			P("\tVMOV R8, V6.S[0]")
			P("\tVTBL V24.B16, [V6.B16], V18.B16")
			P("\tVTBL V23.B16, [V6.B16], V19.B16")
			P("\tVCMTST V25.B16, V18.B16, V18.B16")
			P("\tVCMTST V25.B16, V19.B16, V19.B16")
			P("\tVAND V22.B16, V18.B16, V18.B16")
			P("\tVAND V22.B16, V19.B16, V19.B16")
			P("\tVORR V18.B16, V0.B16, V0.B16")
			P("\tVORR V19.B16, V1.B16, V1.B16")
		}
		if t.bias != "" {
			P("\tVSUB V28.B16, V0.B16, V0.B16")
			P("\tVSUB V28.B16, V1.B16, V1.B16")
		}
		if t.codes == "tbl" {
			P("\tVTBL V0.B16, [V27.B16], V0.B16")
			P("\tVTBL V1.B16, [V27.B16], V1.B16")
		}
	}
}

// q32Type is the layout of a 32-value block: the value bytes at qs (32
// int8 for Q8_0, else 16 bytes of nibbles, low ones first), the fifth bits
// as a u32 at qh (or none, -1), the f16 offset m at min (or none), and
// what the values are: "" as they are, "tbl" through the code book, or
// minus bias.
type q32Type struct {
	ty          string
	bb, qs      int
	qh, min     int
	codes, bias string
}

var q32Types = []q32Type{
	{ty: "Q8_0", bb: 34, qs: 2, qh: -1, min: -1},
	{ty: "Q4_0", bb: 18, qs: 2, qh: -1, min: -1, bias: "8"},
	{ty: "IQ4NL", bb: 18, qs: 2, qh: -1, min: -1, codes: "tbl"},
	{ty: "MXFP4", bb: 17, qs: 1, qh: -1, min: -1, codes: "tbl"},
	{ty: "Q5_0", bb: 22, qs: 6, qh: 2, min: -1, bias: "16"},
	{ty: "Q4_1", bb: 20, qs: 4, qh: -1, min: 2},
	{ty: "Q5_1", bb: 24, qs: 8, qh: 4, min: 2},
}

// q32 writes func dot<ty><variant>(w, a *byte, nb int, tbl *int8) float32:
// the reference arithmetic of dot32 for one weight row of nb blocks and
// one Q8 activation row: per block acc + s*(d*dx), then for types with an
// offset acc + sum(q)*(m*dx), every step rounded. tbl is the code book of
// IQ4_NL or MXFP4 (read by those types only).
//
// Registers: R0 w, R1 a, R2 blocks left, V31 the f32 sum, V29 0x0f bytes,
// V28 the bias bytes, V27 the code book; for the fifth bits V22 0x10
// bytes, V23/V24 the TBL indices of the qh byte of each value, V25 each
// value's bit in it.
func q32(d dotter, t q32Type) {
	ty := t.ty
	P("")
	P("// func dot%s%s(w, a *byte, nb int, tbl *int8) float32", ty, d.name)
	P("TEXT ·dot%s%s(SB), NOSPLIT, $0-36", ty, d.name)
	P("\tMOVD w+0(FP), R0")
	P("\tMOVD a+8(FP), R1")
	P("\tMOVD nb+16(FP), R2")
	P("\tMOVD tbl+24(FP), R3")
	zero(31)
	q32Setup(t)
	P("\tCBZ R2, done")
	P("loop:")
	if ty == "MXFP4" {
		// The E8M0 scale halved (e8m0Half): 2^(e-128) as f32 bits
		// (e-1)<<23, or the subnormal 0x00200000<<e for e < 2.
		P("\tMOVBU (R0), R4")
		P("\tSUB $1, R4, R5")
		P("\tLSL $23, R5, R5")
		P("\tMOVW $0x00200000, R7")
		P("\tLSL R4, R7, R7")
		P("\tCMP $2, R4")
		P("\tCSEL LO, R7, R5, R5")
		P("\tFMOVS R5, F3")
	} else {
		P("\tMOVHU (R0), R4")
		P("\tFMOVS R4, F3")
		P("\tFCVTHS F3, F3") // the f16 scale dw
	}
	P("\tFMOVS (R1), F4")   // dx
	P("\tFMULS F4, F3, F5") // sc = dw*dx, rounded
	P("\tADD $%d, R0, R5", t.qs)
	P("\tADD $8, R1, R6")
	P("\tVLD1 (R6), [V16.B16, V17.B16]")
	q32Decode(t)
	zero(2)
	d.emit(2, 0, 16)
	d.emit(2, 1, 17)
	P("\tVADDV V2.S4, V2") // s, exact
	P("\tWORD $0x%08X // SCVTF S2, S2", scvtfS(2, 2))
	P("\tFMULS F5, F2, F2")   // p = s*sc, rounded
	P("\tFADDS F2, F31, F31") // acc + p, rounded
	if t.min >= 0 {
		// acc + sum(q)*(m*dx), sum(q) = -bias/128 of the activation block.
		P("\tMOVHU %d(R0), R8", t.min)
		P("\tFMOVS R8, F6")
		P("\tFCVTHS F6, F6")
		P("\tFMULS F4, F6, F6") // m*dx
		P("\tMOVW 4(R1), R8")
		P("\tNEG R8, R8")
		P("\tASR $7, R8, R8")
		P("\tSCVTFWS R8, F7")
		P("\tFMULS F6, F7, F7")
		P("\tFADDS F7, F31, F31")
	}
	P("\tADD $%d, R0", t.bb)
	P("\tADD $40, R1")
	P("\tSUBS $1, R2")
	P("\tBNE loop")
	P("done:")
	P("\tFMOVS F31, ret+32(FP)")
	P("\tRET")
}

// The super-block kernels (Q2_K-Q6_K, IQ4_XS) do the whole of dotK
// in assembly:
//
// func dot<ty><variant>(w, a *byte, nb int, tbl *int8) float32
//
// Each super-block's group dots (the raw values times the activations,
// before the group scales) stay in registers, and the super-block ends in
// kEpilogue.
func kFullHeader(d dotter, ty string) {
	P("")
	P("// func dot%s%s(w, a *byte, nb int, tbl *int8) float32", ty, d.name)
	P("TEXT ·dot%s%s(SB), NOSPLIT, $0-36", ty, d.name)
	P("\tMOVD w+0(FP), R0")
	P("\tMOVD a+8(FP), R1")
	P("\tMOVD nb+16(FP), R2")
	zero(31)
	P("\tVMOVI $15, V29.B16")
	if ty == "IQ4XS" {
		P("\tMOVD tbl+24(FP), R4")
		P("\tVLD1 (R4), [V27.B16]")
	}
	P("\tCBZ R2, done")
	P("loop:")
}

func kFullFooter(bb int) {
	P("\tADD $%d, R0", bb)
	P("\tADD $292, R1")
	P("\tSUBS $1, R2")
	P("\tBNE loop")
	P("done:")
	P("\tFMOVS F31, ret+32(FP)")
	P("\tRET")
}

// kScalesK4 decodes the twelve scale bytes of a Q4_K/Q5_K super-block (at
// w+4) into the int32 group scales V9 (groups 0-3), V10 (4-7) and mins
// V12, V13, as getScaleMinK4 does, four groups per 32-bit word.
func kScalesK4() {
	P("\tMOVWU 4(R0), R8")
	P("\tMOVWU 8(R0), R9")
	P("\tMOVWU 12(R0), R10")
	P("\tMOVW $0x3f3f3f3f, R11")
	P("\tMOVW $0x0f0f0f0f, R12")
	P("\tMOVW $0x03030303, R13")
	P("\tAND R11, R8, R14")     // scales 0-3: q[j]&63
	P("\tAND R11, R9, R15")     // mins 0-3: q[j+4]&63
	P("\tAND R12, R10, R19")    // scales 4-7: q[j+4]&15 ...
	P("\tLSR $6, R8, R20")      //
	P("\tAND R13, R20, R20")    //
	P("\tORR R20<<4, R19, R19") // ... | (q[j-4]>>6)<<4
	P("\tLSR $4, R10, R21")     // mins 4-7: q[j+4]>>4 ...
	P("\tAND R12, R21, R21")    //
	P("\tLSR $6, R9, R22")      //
	P("\tAND R13, R22, R22")    //
	P("\tORR R22<<4, R21, R21") // ... | (q[j]>>6)<<4
	P("\tORR R19<<32, R14, R14")
	P("\tORR R21<<32, R15, R15")
	P("\tFMOVD R14, F8")
	P("\tFMOVD R15, F11")
	P("\tVUXTL V8.B8, V8.H8")
	P("\tVUXTL V8.H4, V9.S4")
	P("\tVUXTL2 V8.H8, V10.S4")
	P("\tVUXTL V11.B8, V11.H8")
	P("\tVUXTL V11.H4, V12.S4")
	P("\tVUXTL2 V11.H8, V13.S4")
}

// kEpilogue adds one super-block to the sum in F31 as superBlock does:
// isum (in S0) and msum (in S1) exact, then acc + ((d*dx)*isum -
// (dmin*dx)*msum), every step rounded. dOff and minOff are the offsets of
// the f16 d and dmin in the block (minOff < 0: no mins, dmin = msum = 0).
func kEpilogue(dOff, minOff int) {
	P("\tVADDV V0.S4, V0")
	P("\tVADDV V1.S4, V1")
	W(scvtfS(0, 0), "SCVTF S0, S0")
	W(scvtfS(1, 1), "SCVTF S1, S1")
	P("\tMOVHU %d(R0), R8", dOff)
	P("\tFMOVS R8, F2")
	P("\tFCVTHS F2, F2")
	P("\tFMOVS 256(R1), F4") // dx
	P("\tFMULS F4, F2, F2")  // d*dx
	P("\tFMULS F0, F2, F2")  // a
	if minOff >= 0 {
		P("\tMOVHU %d(R0), R8", minOff)
		P("\tFMOVS R8, F3")
		P("\tFCVTHS F3, F3")
	} else {
		zero(3)
	}
	P("\tFMULS F4, F3, F3")   // dmin*dx
	P("\tFMULS F1, F3, F3")   // m
	P("\tFSUBS F3, F2, F2")   // a - m
	P("\tFADDS F2, F31, F31") // acc + (a - m)
}

// q4k: Q4_K (144-byte blocks, nibbles at 16) or Q5_K (176 bytes, the fifth
// bits at 16, nibbles at 48); eight groups of 32 values: group s in the low
// (even s) or high (odd s) nibbles of 32-byte chunk s/2, plus bit s of
// qh[l] times 16 for Q5_K.
func q4k(d dotter, q5 bool) {
	ty, bb, qs := "Q4K", 144, 16
	if q5 {
		ty, bb, qs = "Q5K", 176, 48
	}
	kFullHeader(d, ty)
	P("\tMOVD R1, R6")
	P("\tADD $%d, R0, R5", qs)
	if q5 {
		P("\tADD $16, R0, R7")
		P("\tVLD1 (R7), [V24.B16, V25.B16]")
		P("\tVMOVI $16, V28.B16")
	}
	for c := 0; c < 4; c++ {
		P("\tVLD1.P 32(R5), [V0.B16, V1.B16]")
		P("\tVLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16]")
		P("\tVAND V29.B16, V0.B16, V2.B16")
		P("\tVAND V29.B16, V1.B16, V3.B16")
		P("\tVUSHR $4, V0.B16, V4.B16")
		P("\tVUSHR $4, V1.B16, V5.B16")
		if q5 {
			for i, s := range []int{2 * c, 2*c + 1} {
				for h := 0; h < 2; h++ {
					// ((qh >> s) & 1) << 4 into the values of group s.
					dst := 2 + 2*i + h
					switch {
					case s < 4:
						P("\tVSHL $%d, V%d.B16, V6.B16", 4-s, 24+h)
					case s == 4:
						P("\tVORR V%d.B16, V%d.B16, V6.B16", 24+h, 24+h)
					default:
						P("\tVUSHR $%d, V%d.B16, V6.B16", s-4, 24+h)
					}
					P("\tVAND V28.B16, V6.B16, V6.B16")
					P("\tVORR V6.B16, V%d.B16, V%d.B16", dst, dst)
				}
			}
		}
		acc := 20 + 2*(c%2)
		zero(acc, acc+1)
		d.emit(acc, 2, 16)
		d.emit(acc, 3, 17)
		d.emit(acc+1, 4, 18)
		d.emit(acc+1, 5, 19)
		if c%2 == 1 {
			reduce4(20, 21, 22, 23)
			if c == 1 {
				P("\tVORR V20.B16, V20.B16, V14.B16") // groups 0-3
			}
		}
	}
	// Groups 4-7 are in V20.
	kScalesK4()
	W(mul4s(0, 9, 14), "MUL V0.4S, V9.4S, V14.4S")
	W(mla4s(0, 10, 20), "MLA V0.4S, V10.4S, V20.4S")
	// msum: the mins times the 32-value sums (pairs of the 16-value ones).
	P("\tADD $260, R1, R8")
	P("\tVLD1 (R8), [V2.H8, V3.H8]")
	W(saddlp4s(2, 2), "SADDLP V2.4S, V2.8H")
	W(saddlp4s(3, 3), "SADDLP V3.4S, V3.8H")
	W(mul4s(1, 12, 2), "MUL V1.4S, V12.4S, V2.4S")
	W(mla4s(1, 13, 3), "MLA V1.4S, V13.4S, V3.4S")
	kEpilogue(0, 2)
	kFullFooter(bb)
}

// q6k: 210-byte blocks, ql at 0, qh at 128; sixteen groups of 16: group g
// is half n = g/8, quarter k = (g%8)/2, bytes 16*(g%2) (see unpackQ6K);
// the value is the 6-bit code minus 32.
func q6k(d dotter) {
	kFullHeader(d, "Q6K")
	P("\tVMOVI $48, V28.B16")
	P("\tVMOVI $32, V30.B16")
	P("\tMOVD R1, R6")
	P("\tMOVD R0, R5")
	P("\tADD $128, R0, R7")
	for n := 0; n < 2; n++ {
		P("\tVLD1.P 64(R5), [V8.B16, V9.B16, V10.B16, V11.B16]") // ql
		P("\tVLD1.P 32(R7), [V12.B16, V13.B16]")                 // qh
		for k := 0; k < 4; k++ {
			P("\tVLD1.P 32(R6), [V%d.B16, V%d.B16]", 16+2*(k%2), 17+2*(k%2))
			for j := 0; j < 2; j++ {
				v := 2*(k%2) + j // the value register V0..V3 of this pass
				lo := 8 + 2*(k%2) + j
				if k/2 == 0 {
					P("\tVAND V29.B16, V%d.B16, V%d.B16", lo, v)
				} else {
					P("\tVUSHR $4, V%d.B16, V%d.B16", lo, v)
				}
				// ((qh >> 2k) & 3) << 4
				switch {
				case 2*k < 4:
					P("\tVSHL $%d, V%d.B16, V6.B16", 4-2*k, 12+j)
				case 2*k == 4:
					P("\tVORR V%d.B16, V%d.B16, V6.B16", 12+j, 12+j)
				default:
					P("\tVUSHR $%d, V%d.B16, V6.B16", 2*k-4, 12+j)
				}
				P("\tVAND V28.B16, V6.B16, V6.B16")
				P("\tVORR V6.B16, V%d.B16, V%d.B16", v, v)
				P("\tVSUB V30.B16, V%d.B16, V%d.B16", v, v)
			}
			if k%2 == 1 {
				zero(20, 21, 22, 23)
				for v := 0; v < 4; v++ {
					d.emit(20+v, v, 16+v)
				}
				reduce4(20, 21, 22, 23)
				// Groups 0-3 to V24, 4-7 to V25, 8-11 to V14; 12-15 stay.
				if save := []int{24, 25, 14, 0}[2*n+k/2]; save != 0 {
					P("\tVORR V20.B16, V20.B16, V%d.B16", save)
				}
			}
		}
	}
	// The int8 scales at 192, widened to int32.
	P("\tADD $192, R0, R8")
	P("\tVLD1 (R8), [V8.B16]")
	W(sshll8h(9, 8), "SSHLL V9.8H, V8.8B, #0")
	W(sshll2_8h(10, 8), "SSHLL2 V10.8H, V8.16B, #0")
	W(sshll4s(11, 9), "SSHLL V11.4S, V9.4H, #0")
	W(sshll2_4s(12, 9), "SSHLL2 V12.4S, V9.8H, #0")
	W(sshll4s(13, 10), "SSHLL V13.4S, V10.4H, #0")
	W(sshll2_4s(8, 10), "SSHLL2 V8.4S, V10.8H, #0")
	W(mul4s(0, 11, 24), "MUL V0.4S, V11.4S, V24.4S")
	W(mla4s(0, 12, 25), "MLA V0.4S, V12.4S, V25.4S")
	W(mla4s(0, 13, 14), "MLA V0.4S, V13.4S, V14.4S")
	W(mla4s(0, 8, 20), "MLA V0.4S, V8.4S, V20.4S")
	zero(1)
	kEpilogue(208, -1)
	kFullFooter(210)
}

// q2k: 84-byte blocks, the scale/min nibbles at 0, the 2-bit values at
// 16, d at 80, dmin at 82; sixteen groups of 16: group g is half g/8,
// bit pair (g%8)/2 of bytes 16*(g%2) of that half's 32 (see unpackQ2K).
func q2k(d dotter) {
	kFullHeader(d, "Q2K")
	P("\tVMOVI $3, V28.B16")
	P("\tMOVD R1, R6")
	P("\tADD $16, R0, R5")
	for h := 0; h < 2; h++ {
		P("\tVLD1.P 32(R5), [V8.B16, V9.B16]")
		for p := 0; p < 2; p++ {
			P("\tVLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16]")
			for kk := 0; kk < 2; kk++ {
				k := 2*p + kk
				for j := 0; j < 2; j++ {
					v := 2*kk + j
					if k == 0 {
						P("\tVAND V28.B16, V%d.B16, V%d.B16", 8+j, v)
					} else {
						P("\tVUSHR $%d, V%d.B16, V%d.B16", 2*k, 8+j, v)
						P("\tVAND V28.B16, V%d.B16, V%d.B16", v, v)
					}
				}
			}
			zero(20, 21, 22, 23)
			for v := 0; v < 4; v++ {
				d.emit(20+v, v, 16+v)
			}
			reduce4(20, 21, 22, 23)
			if save := []int{24, 25, 14, 0}[2*h+p]; save != 0 {
				P("\tVORR V20.B16, V20.B16, V%d.B16", save)
			}
		}
	}
	// Scales (low nibbles) and mins (high), widened to int32, four groups
	// per vector; the mins pair with the sixteen 16-value sums.
	P("\tVLD1 (R0), [V8.B16]")
	P("\tVAND V29.B16, V8.B16, V9.B16")
	P("\tVUSHR $4, V8.B16, V10.B16")
	widen := func(src int) {
		P("\tVUXTL V%d.B8, V11.H8", src)
		P("\tVUXTL2 V%d.B16, V12.H8", src)
		P("\tVUXTL V11.H4, V13.S4")
		P("\tVUXTL2 V11.H8, V15.S4")
		P("\tVUXTL V12.H4, V3.S4")
		P("\tVUXTL2 V12.H8, V4.S4")
	}
	widen(9)
	W(mul4s(2, 13, 24), "MUL V2.4S, V13.4S, V24.4S")
	W(mla4s(2, 15, 25), "MLA V2.4S, V15.4S, V25.4S")
	W(mla4s(2, 3, 14), "MLA V2.4S, V3.4S, V14.4S")
	W(mla4s(2, 4, 20), "MLA V2.4S, V4.4S, V20.4S")
	widen(10)
	P("\tADD $260, R1, R8")
	P("\tVLD1 (R8), [V5.H8, V6.H8]")
	W(sshll4s(16, 5), "SSHLL V16.4S, V5.4H, #0")
	W(sshll2_4s(17, 5), "SSHLL2 V17.4S, V5.8H, #0")
	W(sshll4s(18, 6), "SSHLL V18.4S, V6.4H, #0")
	W(sshll2_4s(19, 6), "SSHLL2 V19.4S, V6.8H, #0")
	W(mul4s(1, 13, 16), "MUL V1.4S, V13.4S, V16.4S")
	W(mla4s(1, 15, 17), "MLA V1.4S, V15.4S, V17.4S")
	W(mla4s(1, 3, 18), "MLA V1.4S, V3.4S, V18.4S")
	W(mla4s(1, 4, 19), "MLA V1.4S, V4.4S, V19.4S")
	P("\tVORR V2.B16, V2.B16, V0.B16")
	kEpilogue(80, 82)
	kFullFooter(84)
}

// q3k: 110-byte blocks, hmask at 0, the low 2-bit values at 32 (laid out
// as Q2_K's), the 6-bit scales at 96, d at 108; group g's values are
// minus 4 where bit 4*(g/8)+(g%8)/2 of hmask[16*(g%2)+l] is clear (see
// unpackQ3K). No mins.
func q3k(d dotter) {
	kFullHeader(d, "Q3K")
	P("\tVMOVI $3, V28.B16")
	P("\tVMOVI $4, V27.B16")
	P("\tMOVD R1, R6")
	P("\tADD $32, R0, R5")
	P("\tVLD1 (R0), [V10.B16, V11.B16]") // hmask
	for h := 0; h < 2; h++ {
		P("\tVLD1.P 32(R5), [V8.B16, V9.B16]")
		for p := 0; p < 2; p++ {
			P("\tVLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16]")
			for kk := 0; kk < 2; kk++ {
				k := 2*p + kk
				P("\tVMOVI $%d, V12.B16", 1<<(4*h+k))
				for j := 0; j < 2; j++ {
					v := 2*kk + j
					if k == 0 {
						P("\tVAND V28.B16, V%d.B16, V%d.B16", 8+j, v)
					} else {
						P("\tVUSHR $%d, V%d.B16, V%d.B16", 2*k, 8+j, v)
						P("\tVAND V28.B16, V%d.B16, V%d.B16", v, v)
					}
					// + 4 where the hmask bit is set, then - 4.
					P("\tVCMTST V12.B16, V%d.B16, V13.B16", 10+j)
					P("\tVAND V27.B16, V13.B16, V13.B16")
					P("\tVADD V13.B16, V%d.B16, V%d.B16", v, v)
					P("\tVSUB V27.B16, V%d.B16, V%d.B16", v, v)
				}
			}
			zero(20, 21, 22, 23)
			for v := 0; v < 4; v++ {
				d.emit(20+v, v, 16+v)
			}
			reduce4(20, 21, 22, 23)
			if save := []int{24, 25, 14, 0}[2*h+p]; save != 0 {
				P("\tVORR V20.B16, V20.B16, V%d.B16", save)
			}
		}
	}
	// The scales as q3KScales: four 32-bit words of 6-bit values, minus 32.
	P("\tMOVWU 96(R0), R8")   // a0
	P("\tMOVWU 100(R0), R9")  // a1
	P("\tMOVWU 104(R0), R10") // tmp
	P("\tMOVW $0x0f0f0f0f, R11")
	P("\tMOVW $0x03030303, R12")
	aux := func(dst, a string, ashift, tshift int) {
		if ashift > 0 {
			P("\tLSR $%d, %s, %s", ashift, a, dst)
			P("\tAND R11, %s, %s", dst, dst)
		} else {
			P("\tAND R11, %s, %s", a, dst)
		}
		if tshift > 0 {
			P("\tLSR $%d, R10, R13", tshift)
			P("\tAND R12, R13, R13")
		} else {
			P("\tAND R12, R10, R13")
		}
		P("\tORR R13<<4, %s, %s", dst, dst)
	}
	aux("R14", "R8", 0, 0)
	aux("R15", "R9", 0, 2)
	aux("R19", "R8", 4, 4)
	aux("R20", "R9", 4, 6)
	P("\tORR R15<<32, R14, R14")
	P("\tORR R20<<32, R19, R19")
	P("\tVMOV R14, V8.D[0]")
	P("\tVMOV R19, V8.D[1]")
	P("\tVMOVI $32, V9.B16")
	P("\tVSUB V9.B16, V8.B16, V8.B16")
	W(sshll8h(11, 8), "SSHLL V11.8H, V8.8B, #0")
	W(sshll2_8h(12, 8), "SSHLL2 V12.8H, V8.16B, #0")
	W(sshll4s(13, 11), "SSHLL V13.4S, V11.4H, #0")
	W(sshll2_4s(15, 11), "SSHLL2 V15.4S, V11.8H, #0")
	W(sshll4s(3, 12), "SSHLL V3.4S, V12.4H, #0")
	W(sshll2_4s(4, 12), "SSHLL2 V4.4S, V12.8H, #0")
	W(mul4s(0, 13, 24), "MUL V0.4S, V13.4S, V24.4S")
	W(mla4s(0, 15, 25), "MLA V0.4S, V15.4S, V25.4S")
	W(mla4s(0, 3, 14), "MLA V0.4S, V3.4S, V14.4S")
	W(mla4s(0, 4, 20), "MLA V0.4S, V4.4S, V20.4S")
	zero(1)
	kEpilogue(108, -1)
	kFullFooter(110)
}

// iq4xs: 136-byte blocks, nibbles at 8; eight groups of 32, group ib the
// IQ4_NL block in bytes 16*ib (low nibbles first), through the code book.
func iq4xs(d dotter) {
	kFullHeader(d, "IQ4XS")
	P("\tMOVD R1, R6")
	P("\tADD $8, R0, R5")
	for ib := 0; ib < 8; ib += 2 {
		P("\tVLD1.P 32(R5), [V0.B16, V1.B16]")
		P("\tVLD1.P 64(R6), [V16.B16, V17.B16, V18.B16, V19.B16]")
		P("\tVAND V29.B16, V0.B16, V2.B16")
		P("\tVUSHR $4, V0.B16, V3.B16")
		P("\tVAND V29.B16, V1.B16, V4.B16")
		P("\tVUSHR $4, V1.B16, V5.B16")
		for v := 2; v < 6; v++ {
			P("\tVTBL V%d.B16, [V27.B16], V%d.B16", v, v)
		}
		acc := 20 + 2*((ib/2)%2)
		zero(acc, acc+1)
		d.emit(acc, 2, 16)
		d.emit(acc, 3, 17)
		d.emit(acc+1, 4, 18)
		d.emit(acc+1, 5, 19)
		if (ib/2)%2 == 1 {
			reduce4(20, 21, 22, 23)
			if ib == 2 {
				P("\tVORR V20.B16, V20.B16, V14.B16") // groups 0-3
			}
		}
	}
	// The scales (iq4XSScale): low nibbles of the four bytes at 4, in
	// order; bits 2ib, 2ib+1 of the u16 at 2 on top; minus 32.
	P("\tMOVWU 4(R0), R8")
	P("\tFMOVS R8, F8")
	P("\tVAND V29.B16, V8.B16, V9.B16")
	P("\tVUSHR $4, V8.B16, V10.B16")
	P("\tVZIP1 V10.B8, V9.B8, V11.B8")
	P("\tMOVHU 2(R0), R9")
	P("\tVDUP R9, V12.H8")
	P("\tMOVD $0xFFFAFFFCFFFE0000, R10") // shifts 0, -2, -4, -6
	P("\tMOVD $0xFFF2FFF4FFF6FFF8, R11") // -8, -10, -12, -14
	P("\tVMOV R10, V13.D[0]")
	P("\tVMOV R11, V13.D[1]")
	W(ushl8h(12, 12, 13), "USHL V12.8H, V12.8H, V13.8H")
	W(xtn8b(12, 12), "XTN V12.8B, V12.8H")
	P("\tVMOVI $3, V15.B16")
	P("\tVAND V15.B16, V12.B16, V12.B16")
	P("\tVSHL $4, V12.B16, V12.B16")
	P("\tVORR V12.B16, V11.B16, V11.B16")
	P("\tVMOVI $32, V15.B16")
	P("\tVSUB V15.B16, V11.B16, V11.B16")
	W(sshll8h(11, 11), "SSHLL V11.8H, V11.8B, #0")
	W(sshll4s(9, 11), "SSHLL V9.4S, V11.4H, #0")
	W(sshll2_4s(10, 11), "SSHLL2 V10.4S, V11.8H, #0")
	W(mul4s(0, 9, 14), "MUL V0.4S, V9.4S, V14.4S")
	W(mla4s(0, 10, 20), "MLA V0.4S, V10.4S, V20.4S")
	zero(1)
	kEpilogue(0, -1)
	kFullFooter(136)
}
