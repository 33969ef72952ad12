package main

import "fmt"

// genKQuant writes kquant_amd64.s: the K-quant and Q4_0 dot products of
// kquant.go. The four-row matvec kernels share one loop (kqDot4) around a
// pair macro; the one-weight-row kernels (kqRow4*) are unrolled over the
// weight chunks and the four activation rows; the AVX-512 VNNI kernels
// (kqDotZ) come in four- and eight-row forms whose groups of four are the
// same code.
func genKQuant() {
	T(kqIntro)
	T(kqYMacros)
	kqDot4(kqQ4KDot4)
	P("")
	kqDot4(kqQ5KDot4)
	T(kqQ6KMacros)
	kqDot4(kqQ6KDot4)
	T(kqQ40Macros)
	kqDot4(kqQ40Dot4)
	P("")
	kqRow4K("kqQ4KRow4AVX2", false)
	P("")
	P("")
	kqRow4K("kqQ5KRow4AVX2", true)
	P("")
	P("")
	kqRow4Q6K()
	T(kqVNNIMacros)
	kqDot4(kqQ5KDot4VNNI)
	T(kqQ40RowMacros)
	kqQ40Gemv8()
	P("")
	kqQ40Row4()
	T(kqZMacros)
	kqDotZ(false, 1)
	P("")
	kqDotZ(false, 2)
	P("")
	kqQ4KDotY()
	T(kqZ6Macros)
	kqDotZ(true, 1)
	P("")
	kqDotZ(true, 2)
}

// kqActRow is activation row i's index suffix on SI (R9 = as, R11 = 3*as).
var kqActRow = [4]string{"", "(R9*1)", "(R9*2)", "(R11*1)"}

// kqDot4Kernel is one four-output kernel of the shared Dot4 loop: four
// pairs (PAIRk, then the kernel's pair macro), the tail turning the int32
// vectors into the four float results, and the block strides.
type kqDot4Kernel struct {
	name, label string
	after       string // comment lines between the func line and TEXT
	frame       string
	prologue    string // replaces the argument and mask loads when set
	pairPtr     string // the pair pointer macros' prefix (default PAIR)
	consts      string // loads after the nibble mask (after prologue)
	pre         string // loop body lines before the pairs
	pair        func(k int) string
	tail        string // after the pairs, up to the strides
	wb, ab      string // weight and activation block bytes
}

func kqK4Pair(m string) func(int) string {
	return func(k int) string { return fmt.Sprintf("%s(Y%d, Y%d)", m, 8+k, 12+k) }
}

func kqAccPair(m string) func(int) string {
	return func(k int) string { return fmt.Sprintf("%s(Y%d)", m, 8+k) }
}

// kqQ6KScales is the Q6_K tail: the int32 sums times the rows' f16 d
// and the activation scales, into acc.
func kqQ6KScales(acc string) string {
	return `	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, 208(BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, 208(BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, 208(BX), X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, ` + acc + ", " + acc + "\n"
}

var (
	kqQ4KDot4 = kqDot4Kernel{
		name: "kqQ4KDot4AVX2", label: "q4kLoop", frame: "$32-48",
		pair: kqK4Pair("Q4K_PAIR"), tail: "\n\tK4_FINISH\n\n", wb: "144", ab: "$ACT_BLOCK",
	}
	kqQ5KDot4 = kqDot4Kernel{
		name: "kqQ5KDot4AVX2", label: "q5kLoop", frame: "$32-48",
		pre:  "\tVMOVDQU kqMask10<>(SB), Y7\n",
		pair: kqK4Pair("Q5K_PAIR"), tail: "\n\tK4_FINISH\n\n", wb: "176", ab: "$ACT_BLOCK",
	}
	kqQ5KDot4VNNI = kqDot4Kernel{
		name: "kqQ5KDot4VNNI", label: "q5kVLoop", frame: "$32-48",
		pre:  "\tVMOVDQU kqMask10<>(SB), Y7\n",
		pair: kqK4Pair("Q5K_PAIRV"), tail: "\n\tK4_FINISH\n\n", wb: "176", ab: "$ACT_BLOCK",
	}
	kqQ6KDot4 = kqDot4Kernel{
		name: "kqQ6KDot4AVX2", label: "q6kLoop", frame: "$32-48",
		consts: "\tVMOVDQU kqMask30<>(SB), Y12\n\tVMOVDQU kqSpread2<>(SB), Y13\n",
		pair:   kqAccPair("Q6K_PAIR"), tail: "\n" + kqQ6KScales("X0") + "\n", wb: "210", ab: "$ACT_BLOCK",
	}
	kqQ40Dot4 = kqDot4Kernel{
		name: "kqQ40Dot4AVX2", label: "q40Loop", frame: "$0-48",
		after: `//
// Q4_0 weights with Q8 activation blocks (40 bytes: f32 dx, int32 bias =
// -128*sum(q), 32 int8): per block s = sum(nibble*q) - 8*sum(q), exact,
// then acc + float32(s)*float32(d*dx), as dot32 in qdot.go.
`,
		consts: "\tVMOVDQU kqOnes16<>(SB), Y13\n",
		pair:   kqAccPair("Q40_PAIR"),
		tail: `	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)

	// s = sum(nibble*q) + bias/16.
	VMOVD   4(SI), X9
	LEAQ    (SI)(R9*1), AX
	VPINSRD $1, 4(AX), X9, X9
	LEAQ    (SI)(R9*2), AX
	VPINSRD $2, 4(AX), X9, X9
	LEAQ    (SI)(R11*1), AX
	VPINSRD $3, 4(AX), X9, X9
	VPSRAD  $4, X9, X9
	VPADDD  X9, X8, X8

	VPXOR   X4, X4, X4
	VPINSRW $0, (DI), X4, X4
	LEAQ    (DI)(R8*1), BX
	VPINSRW $1, (BX), X4, X4
	LEAQ    (DI)(R8*2), BX
	VPINSRW $2, (BX), X4, X4
	LEAQ    (DI)(R10*1), BX
	VPINSRW $3, (BX), X4, X4
	VCVTPH2PS X4, X6

	VMOVD   (SI), X7
	LEAQ    (SI)(R9*1), AX
	VPINSRD $1, (AX), X7, X7
	LEAQ    (SI)(R9*2), AX
	VPINSRD $2, (AX), X7, X7
	LEAQ    (SI)(R11*1), AX
	VPINSRD $3, (AX), X7, X7

	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

`,
		wb: "18", ab: "$40",
	}
)

const kqSig = "(w *byte, ws int, a *byte, as int, nb int, out *float32)"

// kqEnd closes a kernel's block loop: the strides, the loop branch and
// the store of the four results in X0.
func kqEnd(label, wb, ab string) {
	P("\tADDQ $%s, DI", wb)
	P("\tADDQ %s, SI", ab)
	P("\tDECQ nb+32(FP)")
	P("\tJNZ  %s", label)
	P("")
	P("\tMOVQ out+40(FP), DX")
	P("\tVMOVUPS X0, (DX)")
	P("\tVZEROUPPER")
	P("\tRET")
}

func kqDot4(k kqDot4Kernel) {
	P("// func %s%s", k.name, kqSig)
	T(k.after)
	P("TEXT ·%s(SB), NOSPLIT, %s", k.name, k.frame)
	if k.prologue != "" {
		T(k.prologue)
		T(k.consts)
	} else {
		P("\tMOVQ w+0(FP), DI")
		P("\tMOVQ ws+8(FP), R8")
		P("\tMOVQ a+16(FP), SI")
		P("\tMOVQ as+24(FP), R9")
		P("\tLEAQ (R8)(R8*2), R10")
		P("\tLEAQ (R9)(R9*2), R11")
		P("\tVMOVDQU kqMask0F<>(SB), Y1")
		T(k.consts)
		P("\tVXORPS X0, X0, X0")
	}
	P("")
	P("%s:", k.label)
	T(k.pre)
	ptr := k.pairPtr
	if ptr == "" {
		ptr = "PAIR"
	}
	for i := range 4 {
		P("\t%s%d", ptr, i)
		P("\t%s", k.pair(i))
	}
	T(k.tail)
	kqEnd(k.label, k.wb, k.ab)
}

// kqRow4Start is the prologue of the one-weight-row kernels: ws is
// ignored (R8 = R10 = 0, so the PAIR and finish macros see one row).
func kqRow4Start(name, doc, consts string) {
	P("// func %s%s", name, kqSig)
	P("//")
	T(doc)
	P("TEXT ·%s(SB), NOSPLIT, $32-48", name)
	P("\tMOVQ w+0(FP), DI")
	P("\tXORQ R8, R8")
	P("\tXORQ R10, R10")
	P("\tMOVQ a+16(FP), SI")
	P("\tMOVQ as+24(FP), R9")
	P("\tLEAQ (R9)(R9*2), R11")
	P("\tVMOVDQU kqMask0F<>(SB), Y1")
	T(consts)
	P("\tVXORPS X0, X0, X0")
	P("")
	P("loop%s:", name)
}

// kqQ5KShift is the shift moving bit s of qh into bit 4 of the values of
// chunk c's low (k = 0) and high (k = 1) sub-block (Q5K_PAIR's table).
func kqQ5KShift(c, k int) (string, int) {
	n := 4 - 2*c - k
	if n > 0 {
		return "VPSLLW", n
	}
	return "VPSRLW", -n
}

// kqRow4K writes kqQ4KRow4AVX2 (q5 false) or kqQ5KRow4AVX2: the scales
// of the weight row decoded once (K4_SCALES), each 32-byte nibble chunk
// unpacked once and multiplied into the four activation rows' sums.
func kqRow4K(name string, q5 bool) {
	kqRow4Start(name, `// One weight row against four activation rows (ws is ignored): the
// scales and the weight values are decoded once for the four.
`, "")
	P("\tMOVQ DI, BX")
	P("\tMOVQ SI, AX")
	P("\tK4_SCALES(Y12)")
	P("\tVPMOVZXBW X3, Y7")
	for r := 1; r < 4; r++ {
		P("\tVPMADDWD ACT_SUMS16(SI)%s, Y7, Y%d", kqActRow[r], 12+r)
	}
	for r := range 4 {
		P("\tVPXOR Y%d, Y%d, Y%d", 8+r, 8+r, 8+r)
	}
	qs, wb := 16, 144
	if q5 {
		qs, wb = 48, 176
	}
	for c := range 4 {
		P("\tVMOVDQU (%d+32*%d)(BX), Y2", qs, c)
		P("\tVPAND Y1, Y2, Y3")
		P("\tVPSRLW $4, Y2, Y2")
		P("\tVPAND Y1, Y2, Y2")
		if q5 {
			for k, dst := range []string{"Y3", "Y2"} {
				op, n := kqQ5KShift(c, k)
				P("\t%s $%d, 16(BX), Y6", op, n)
				P("\tVPAND kqMask10<>(SB), Y6, Y6")
				P("\tVPOR Y6, %s, %s", dst, dst)
			}
		}
		P("\tVPBROADCASTW (16+4*%d)(SP), Y4", c)
		P("\tVPBROADCASTW (18+4*%d)(SP), Y5", c)
		for r := range 4 {
			acc := 8 + r
			P("\tVPMADDUBSW (64*%d)(SI)%s, Y3, Y6", c, kqActRow[r])
			P("\tVPMADDWD Y4, Y6, Y6")
			P("\tVPADDD Y6, Y%d, Y%d", acc, acc)
			P("\tVPMADDUBSW (64*%d+32)(SI)%s, Y2, Y6", c, kqActRow[r])
			P("\tVPMADDWD Y5, Y6, Y6")
			P("\tVPADDD Y6, Y%d, Y%d", acc, acc)
		}
	}
	P("\tK4_FINISH")
	P("")
	kqEnd("loop"+name, fmt.Sprint(wb), "$ACT_BLOCK")
}

// kqRow4Q6K writes kqQ6KRow4AVX2: per 32-byte value vector (Q6K_HALF's
// order), the 6-bit values assembled once and multiplied into the four
// activation rows' sums.
func kqRow4Q6K() {
	const name = "kqQ6KRow4AVX2"
	kqRow4Start(name, "// One Q6_K weight row against four activation rows (ws is ignored).\n",
		"\tVMOVDQU kqMask30<>(SB), Y12\n\tVMOVDQU kqSpread2<>(SB), Y13\n")
	P("\tVPMOVSXBW 192(DI), Y5")
	P("\tVMOVDQU Y5, 0(SP)")
	for r := range 4 {
		acc := 8 + r
		P("\tVPMADDWD ACT_SUMS16(SI)%s, Y5, Y6", kqActRow[r])
		P("\tVPSLLD $5, Y6, Y6")
		P("\tVPXOR Y%d, Y%d, Y%d", acc, acc, acc)
		P("\tVPSUBD Y6, Y%d, Y%d", acc, acc)
	}
	for n := range 2 {
		P("\tVMOVDQU (64*%d)(DI), Y2", n)
		P("\tVMOVDQU (64*%d+32)(DI), Y3", n)
		P("\tVMOVDQU (128+32*%d)(DI), Y4", n)
		for j := range 4 {
			// Low nibbles of Y2, Y3, then their high nibbles; qh bits
			// 2j..2j+1 (Y4) moved to bits 4..5.
			src := []string{"Y2", "Y3"}[j%2]
			if j < 2 {
				P("\tVPAND Y1, %s, Y5", src)
			} else {
				P("\tVPSRLW $4, %s, Y5", src)
				P("\tVPAND Y1, Y5, Y5")
			}
			switch j {
			case 0:
				P("\tVPSLLW $4, Y4, Y7")
				P("\tVPAND Y12, Y7, Y7")
			case 1:
				P("\tVPSLLW $2, Y4, Y7")
				P("\tVPAND Y12, Y7, Y7")
			case 2:
				P("\tVPAND Y12, Y4, Y7")
			case 3:
				P("\tVPSRLW $2, Y4, Y7")
				P("\tVPAND Y12, Y7, Y7")
			}
			P("\tVPOR Y7, Y5, Y5")
			off := 128*n + 32*j
			P("\tVPBROADCASTD %d(SP), Y6", off/8)
			P("\tVPSHUFB Y13, Y6, Y6")
			for r := range 4 {
				acc := 8 + r
				P("\tVPMADDUBSW %d(SI)%s, Y5, Y7", off, kqActRow[r])
				P("\tVPMADDWD Y6, Y7, Y7")
				P("\tVPADDD Y7, Y%d, Y%d", acc, acc)
			}
		}
	}
	T(`	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	VPXOR   X4, X4, X4
	VPINSRW $0, 208(DI), X4, X4
	VPSHUFLW $0, X4, X4
	VCVTPH2PS X4, X6
	ACT_SCALES
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

`)
	kqEnd("loop"+name, "210", "$ACT_BLOCK")
}

// kqQ40Rows8 is the address of Q4_0 row k of the 8-row matvec at byte off
// (rows 4..7 from R12 = DI + 4*rb).
func kqQ40Rows8(k int, off string) string {
	base := "(DI)"
	if k >= 4 {
		base = "(R12)"
	}
	return off + base + [4]string{"", "(R8*1)", "(R8*2)", "(R10*1)"}[k%4]
}

func kqQ40Gemv8() {
	T(`// func kqQ40Gemv8AVX2(w *byte, rb int, a *byte, nb int, out *float32)
//
// Eight Q4_0 weight rows (at w + k*rb) against one Q8 activation row, the
// eight outputs in the lanes of Y0, with dot32's arithmetic.
TEXT ·kqQ40Gemv8AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (DI)(R8*4), R12
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqOnes16<>(SB), Y13
	VXORPS Y0, Y0, Y0

q40g8Loop:
	VMOVDQU 8(SI), Y15
`)
	for k := range 8 {
		P("\tQ40_ROW(%s, Y%d)", kqQ40Rows8(k, "2"), 2+k)
	}
	T(`	VPHADDD Y3, Y2, Y2
	VPHADDD Y5, Y4, Y4
	VPHADDD Y7, Y6, Y6
	VPHADDD Y9, Y8, Y8
	VPHADDD Y4, Y2, Y2
	VPHADDD Y8, Y6, Y6
	VPERM2I128 $0x20, Y6, Y2, Y10
	VPERM2I128 $0x31, Y6, Y2, Y11
	VPADDD  Y11, Y10, Y10

	// s = sum(nibble*q) + bias/16.
	VPBROADCASTD 4(SI), Y11
	VPSRAD  $4, Y11, Y11
	VPADDD  Y11, Y10, Y10

	VPXOR   X12, X12, X12
`)
	for k := range 8 {
		P("\tQ40_D(%d, %s)", k, kqQ40Rows8(k, ""))
	}
	T(`	VCVTPH2PS X12, Y12
	VBROADCASTSS (SI), Y14
	VMULPS  Y14, Y12, Y12
	VCVTDQ2PS Y10, Y10
	VMULPS  Y12, Y10, Y10
	VADDPS  Y10, Y0, Y0

	ADDQ $18, DI
	ADDQ $18, R12
	ADDQ $40, SI
	DECQ CX
	JNZ  q40g8Loop

	MOVQ out+32(FP), DX
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET
`)
}

func kqQ40Row4() {
	T(`// func kqQ40Row4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One Q4_0 weight row against four Q8 activation rows (ws is ignored):
// the nibbles are unpacked once per block for the four.
TEXT ·kqQ40Row4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ a+16(FP), SI
	MOVQ as+24(FP), R9
	LEAQ (R9)(R9*2), R11
	VMOVDQU kqMask0F<>(SB), Y1
	VMOVDQU kqOnes16<>(SB), Y13
	VXORPS X0, X0, X0

q40r4Loop:
	VMOVDQU      2(DI), X2
	VPSRLW       $4, X2, X3
	VINSERTI128  $1, X3, Y2, Y2
	VPAND        Y1, Y2, Y2
`)
	for r := range 4 {
		P("\tVPMADDUBSW   8(SI)%s, Y2, Y3", kqActRow[r])
		P("\tVPMADDWD     Y13, Y3, Y%d", 8+r)
	}
	P("\tHSUM4x8(Y8, Y9, Y10, Y11, X8, X9)")
	P("")
	kqInsertD("4", "X9")
	T(`	VPSRAD  $4, X9, X9
	VPADDD  X9, X8, X8

	VPXOR    X4, X4, X4
	VPINSRW  $0, (DI), X4, X4
	VPSHUFLW $0, X4, X4
	VCVTPH2PS X4, X6

`)
	kqInsertD("", "X7")
	T(`
	VMULPS  X7, X6, X6
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VADDPS  X8, X0, X0

`)
	kqEnd("q40r4Loop", "18", "$40")
}

// kqInsertD gathers the dword at off of the four activation rows into x.
func kqInsertD(off, x string) {
	P("\tVMOVD   %s(SI), %s", off, x)
	for r := 1; r < 4; r++ {
		P("\tVPINSRD $%d, %s(SI)%s, %s, %s", r, off, kqActRow[r], x, x)
	}
}

// kqDotZ writes the AVX-512 VNNI matvec kernels for one activation row:
// kqQ4KDot4VNNIZ / kqQ6KDot4VNNIZ (groups = 1) and their eight-row forms
// (groups = 2: the second group of four rows at w+4*ws, swapped into DI,
// the activation vectors loaded once for both). Each group's code is the
// four-row kernel's, so each row's result is the same bits.
func kqDotZ(q6 bool, groups int) {
	kind, rows, pfx := "Q4K", 4*groups, "q4k"
	if q6 {
		kind, pfx = "Q6K", "q6k"
	}
	name := fmt.Sprintf("kq%sDot%dVNNIZ", kind, rows)
	tag := "Z"
	if groups == 2 {
		tag = "8"
	}
	P("// func %s%s", name, kqSig)
	P("//")
	T(kqDotZDoc[name])
	P("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	P("\tMOVQ w+0(FP), DI")
	P("\tMOVQ ws+8(FP), R8")
	P("\tPF_DIST(%s%spf)", pfx, tag)
	P("\tMOVQ a+16(FP), SI")
	P("\tXORQ R9, R9")
	P("\tXORQ R11, R11")
	P("\tLEAQ (R8)(R8*2), R10")
	if groups == 2 {
		P("\tLEAQ (DI)(R8*4), R13")
	}
	P("\tVPBROADCASTB kqMask0F<>(SB), Z24")
	idx := "kqScIdx"
	if q6 {
		P("\tVPBROADCASTB kqMask30<>(SB), Z25")
		idx = "kqSc6Idx"
	}
	for i := range 4 {
		P("\tVMOVDQU64 %s%d<>(SB), Z%d", idx, i, 16+i)
	}
	for g := range groups {
		P("\tVXORPS X%d, X%d, X%d", g, g, g)
	}
	P("")
	label := fmt.Sprintf("%s%sLoop", pfx, tag)
	P("%s:", label)
	// The activation values in the order of the weight vectors: Q4_K's
	// 64-byte nibble halves pair chunks (0, 64), (32, 96), ...; Q6_K's
	// value vectors the two 128-value halves.
	for v := range 4 {
		lo := 32*(v%2) + 128*(v/2)
		hi := lo + 64
		if q6 {
			lo, hi = 32*v, 32*v+128
		}
		src := "(SI)"
		if lo != 0 {
			src = fmt.Sprintf("%d(SI)", lo)
		}
		P("\tVMOVDQU64     %s, Y%d", src, 20+v)
		P("\tVINSERTI64X4  $1, %d(SI), Z%d, Z%d", hi, 20+v, 20+v)
	}
	for g := range groups {
		if g == 1 {
			P("\tXCHGQ DI, R13")
		}
		if q6 {
			for k := range 4 {
				P("\tPAIR%d", k)
				P("\tQ6K_PAIRZ(Z%d, Y%d)", 8+k, 8+k)
			}
			P("")
			T(kqQ6KScales(fmt.Sprintf("X%d", g)))
		} else {
			P("\tK4_SCALES4")
			for k := range 4 {
				P("\tPAIR%d", k)
				P("\tPREFETCHT1 (BX)(R12*1)")
				P("\tPREFETCHT1 64(BX)(R12*1)")
				P("\tPREFETCHT1 128(BX)(R12*1)")
				P("\tQ4K_PAIR4(%d, Z%d, Y%d)", k, 8+k, 8+k)
			}
			P("")
			T(`	HSUM4x8(Y8, Y9, Y10, Y11, X8, X9)
	K4_MINS4
	VCVTPH2PS X4, Y4
	VEXTRACTF128 $1, Y4, X5
	VSHUFPS $0x88, X5, X4, X6
	VSHUFPS $0xDD, X5, X4, X5
	ACT_SCALES
	VMULPS  X7, X6, X6
	VMULPS  X7, X5, X5
	VCVTDQ2PS X8, X8
	VMULPS  X6, X8, X8
	VCVTDQ2PS X12, X12
	VMULPS  X5, X12, X12
	VSUBPS  X12, X8, X8
`)
			P("\tVADDPS  X8, X%d, X%d", g, g)
		}
		P("")
	}
	wb := "144"
	if q6 {
		wb = "210"
	}
	if groups == 2 {
		P("\tXCHGQ DI, R13")
		P("")
	}
	P("\tADDQ $%s, DI", wb)
	if groups == 2 {
		P("\tADDQ $%s, R13", wb)
	}
	P("\tADDQ $ACT_BLOCK, SI")
	P("\tDECQ nb+32(FP)")
	P("\tJNZ  %s", label)
	P("")
	P("\tMOVQ out+40(FP), DX")
	P("\tVMOVUPS X0, (DX)")
	if groups == 2 {
		P("\tVMOVUPS X1, 16(DX)")
	}
	P("\tVZEROUPPER")
	P("\tRET")
}

// kqDotZDoc is each VNNIZ kernel's doc comment after its signature.
var kqDotZDoc = map[string]string{
	"kqQ4KDot4VNNIZ": `// kqQ4KDot4AVX2 with AVX-512 VNNI for one activation row (as is
// ignored), on 512-bit vectors: each super-block's activation values are
// arranged once into the four orders of the rows' 64-byte nibble halves,
// so a row takes two loads and four multiply-add pairs, and the four
// rows' scales and mins are decoded and applied together, a row per
// 128-bit lane.
`,
	"kqQ4KDot8VNNIZ": `// kqQ4KDot4VNNIZ over eight rows (two groups of four, the second at
// w+4*ws) for one activation row: each super-block's activation vectors are
// loaded once for both groups. Each row's arithmetic is the four-row
// kernel's, so its result is the same bits.
`,
	"kqQ6KDot4VNNIZ": `// kqQ6KDot4AVX2 with AVX-512 VNNI for one activation row (as is
// ignored), on 512-bit vectors, the activation values arranged once per
// super-block into the order of the value vectors (see Q6K_PAIRZ).
`,
	"kqQ6KDot8VNNIZ": `// kqQ6KDot4VNNIZ over eight rows (two groups of four, the second at
// w+4*ws), the activation vectors loaded once per super-block for both;
// each row's arithmetic is the four-row kernel's (the same bits).
`,
}
