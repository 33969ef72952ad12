package main

// genIQ4XSDot writes iq4xs_amd64.s: the IQ4_XS products with Q8_K
// activation blocks. The four-output kernels are kquant.go's Dot4 loop
// with IQ4_XS's pair macros; the one-row kernel and the expander walk the
// eight sub-blocks of a super-block.
func genIQ4XSDot() {
	T(iqxIntro)
	kqDot4(iqxDot4)
	P("")
	kqDot4(iqxDot4VNNI)
	P("")
	T(iqxZMacros)
	kqDot4(iqxDot4VNNIZ)
	P("")
	T(iqxMMacros)
	kqDot4(iqxDot4VNNIM)
	P("")
	T(kqPfDistMacro)
	T(iqxAMacros)
	kqDot4(iqxDot4VNNIA)
	P("")
	iqxDot8A()
	P("")
	T(iqxRowMacros)
	iqxRow4()
	P("")
	iqxExpand()
}

var (
	iqxDot4 = kqDot4Kernel{
		name: "kqIQ4XSDot4AVX2", label: "iqxLoop", frame: "$48-48",
		prologue: "\tIQX_PROLOGUE\n", pairPtr: "IQX_P",
		pair: func(k int) string { return "IQX_PAIR(IQX_SUB, Y" + itoa(8+k) + ")" },
		tail: "\tIQX_FINISH\n", wb: "136", ab: "$ACT_BLOCK",
	}
	iqxDot4VNNI = kqDot4Kernel{
		name: "kqIQ4XSDot4VNNI", label: "iqxVLoop", frame: "$48-48",
		prologue: "\tIQX_PROLOGUE\n", pairPtr: "IQX_P",
		consts: `	VPBROADCASTD iqxMask0F<>(SB), Z14
	VBROADCASTI32X4 iqxBookU<>(SB), Z12
	MOVL         $0xff00, AX
	KMOVW        AX, K3
`,
		pair: func(k int) string { return "IQX_PAIRZ(Z" + itoa(8+k) + ", Y" + itoa(8+k) + ")" },
		tail: "\tIQX_FINISH\n", wb: "136", ab: "$ACT_BLOCK",
	}
	iqxDot4VNNIZ = kqDot4Kernel{
		name: "kqIQ4XSDot4VNNIZ", label: "iqxZLoop", frame: "$0-48",
		prologue: "\tIQX_PROLOGUE\n", pairPtr: "IQX_P",
		consts: `	XORQ         R9, R9
	XORQ         R11, R11
	VPBROADCASTD iqxMask0F<>(SB), Z14
	VBROADCASTI32X4 iqxBookU<>(SB), Z12
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z15
	VMOVDQU64    iqxLane0<>(SB), Z18
	VMOVDQU64    iqxLane1<>(SB), Z19
	VPXORD       Z30, Z30, Z30
`,
		pre: `	IQXZ_ACT(0, Z20, Z21, Z16)
	IQXZ_ACT(1, Z22, Z23, Z17)
`,
		pair: func(k int) string { return "IQXZ_ROW(Z" + itoa(8+k) + ", Y" + itoa(8+k) + ")" },
		tail: "\tIQX_FINISH\n", wb: "136", ab: "$ACT_BLOCK",
	}
	iqxDot4VNNIM = kqDot4Kernel{
		name: "kqIQ4XSDot4VNNIM", label: "iqxMLoop", frame: "$0-48",
		prologue: "\tIQX_PROLOGUE\n", pairPtr: "IQX_P",
		consts: `	XORQ         R9, R9
	XORQ         R11, R11
	VPBROADCASTD iqxMask0F<>(SB), Z14
	VBROADCASTI32X4 iqxBookU<>(SB), Z12
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z15
	VMOVDQU64    iqxCtl0<>(SB), Z18
	VMOVDQU64    iqxCtl1<>(SB), Z19
	MOVL         $0x300f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x0101, AX
	VPBROADCASTD AX, Z5
	MOVL         $-32, AX
	VPBROADCASTD AX, Z13
	VPXORD       Z30, Z30, Z30
`,
		pre: `	IQXZ_ACT(0, Z20, Z21, Z16)
	IQXZ_ACT(1, Z22, Z23, Z17)
	VBROADCASTSS ACT_SCALE(SI), X7
`,
		pair: func(k int) string { return "IQXM_ROW(Z" + itoa(8+k) + ", Y" + itoa(8+k) + ")" },
		tail: "\tIQXM_FINISH\n", wb: "136", ab: "$ACT_BLOCK",
	}
	iqxDot4VNNIA = kqDot4Kernel{
		name: "kqIQ4XSDot4VNNIA", label: "iqxALoop", frame: "$0-48",
		prologue: "\tIQX_PROLOGUE\n", pairPtr: "IQX_P",
		consts: `	PF_DIST(iqxAPf)
	XORQ         R9, R9
	XORQ         R11, R11
	VPBROADCASTD iqxMask0F<>(SB), Z14
	VBROADCASTI32X4 iqxBookU<>(SB), Z12
	VMOVDQU64    iqxCtl0<>(SB), Z18
	VMOVDQU64    iqxCtl1<>(SB), Z19
	MOVL         $0x300f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x0101, AX
	VPBROADCASTD AX, Z5
	MOVL         $-32, AX
	VPBROADCASTD AX, Z13
`,
		pre:  "\tVBROADCASTSS IQXA_SCALE(SI), X7\n",
		pair: func(k int) string { return "IQXA_ROW(Z" + itoa(8+k) + ")" },
		tail: "\tIQXM_FINISH\n", wb: "136", ab: "$IQXA_BLOCK",
	}
)

// iqxRow4 writes kqIQ4XSRow4AVX2: the scales and each sub-block's values
// decoded once for the four activation rows.
func iqxRow4() {
	T(`// func kqIQ4XSRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// One weight row against four activation rows (ws is ignored), the
// values decoded once for the four.
TEXT ·kqIQ4XSRow4AVX2(SB), NOSPLIT, $48-48
	IQX_PROLOGUE
	XORQ R8, R8
	XORQ R10, R10

iqxRALoop:
	MOVQ  DI, BX
	IQX_SCALES
`)
	for r := range 4 {
		P("\tVPXOR Y%d, Y%d, Y%d", 8+r, 8+r, 8+r)
	}
	for ib := range 8 {
		P("\tIQX_RSUB(%d)", ib)
	}
	P("\tIQX_FINISH")
	kqEnd("iqxRALoop", "136", "$ACT_BLOCK")
}

// iqxExpand writes expandIQ4XS: each sub-block becomes a Q8_0 block
// (EXX_SUB), the super-block's d goes to the separate d array.
func iqxExpand() {
	T(`// func expandIQ4XS(dst *byte, w *byte, rb int, rows int, nb int, d *byte)
TEXT ·expandIQ4XS(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    w+8(FP), R8
	MOVQ    rb+16(FP), R9
	MOVQ    rows+24(FP), R10
	MOVQ    d+40(FP), R11
	VMOVDQU iqxMask0F<>(SB), X15
	VMOVDQU iqxBook<>(SB), X14

exxrow:
	TESTQ R10, R10
	JZ    exxdone
	MOVQ  R8, SI
	MOVQ  R11, R12
	MOVQ  nb+32(FP), CX

exxblk:
	MOVWLZX (SI), AX
	MOVW    AX, (R12)
	MOVWLZX 2(SI), R13
	MOVL    4(SI), R14
`)
	for ib := range 8 {
		P("\tEXX_SUB(%d)", ib)
	}
	T(`	ADDQ $136, SI
	ADDQ $32, R12
	DECQ CX
	JNZ  exxblk
	ADDQ R9, R8
	ADDQ $2, R11
	DECQ R10
	JMP  exxrow

exxdone:
	RET
`)
}

// iqxDot8A writes kqIQ4XSDot8VNNIA: kqIQ4XSDot4VNNIA's rows eight per
// call (rows 4..7 from R13 = w + 4*ws), their sums reduced and their float
// arithmetic done together, eight lanes.
func iqxDot8A() {
	T(`// func kqIQ4XSDot8VNNIA(w *byte, ws int, a *byte, as int, nb int, out *float32)
//
// kqIQ4XSDot4VNNIA on eight rows (as is ignored): per super-block the same
// integer sums per row, and per lane the same float operations in the
// same order, so its outputs are the same bits.
TEXT ·kqIQ4XSDot8VNNIA(SB), NOSPLIT, $0-48
	MOVQ            w+0(FP), DI
	MOVQ            ws+8(FP), R8
	PF_DIST(iqx8Pf)
	MOVQ            a+16(FP), SI
	LEAQ            (R8)(R8*2), R10
	LEAQ            (DI)(R8*4), R13
	VBROADCASTI32X4 iqxBookU<>(SB), Z12
	VMOVDQU64       iqxCtl0<>(SB), Z18
	VMOVDQU64       iqxCtl1<>(SB), Z19
	MOVL            $0x300f, AX
	VPBROADCASTD    AX, Z31
	MOVL            $0x0101, AX
	VPBROADCASTD    AX, Z5
	MOVL            $-32, AX
	VPBROADCASTD    AX, Z13
	VXORPS          X0, X0, X0

iqx8Loop:
	VBROADCASTSS IQXA_SCALE(SI), Y7
`)
	rows := []struct{ base, off, acc string }{
		{"DI", "", "Z8"}, {"DI", "R8*1", "Z9"}, {"DI", "R8*2", "Z10"}, {"DI", "R10*1", "Z11"},
		{"R13", "", "Z20"}, {"R13", "R8*1", "Z21"}, {"R13", "R8*2", "Z22"}, {"R13", "R10*1", "Z23"},
	}
	for _, r := range rows {
		if r.off == "" {
			P("\tMOVQ %s, BX", r.base)
		} else {
			P("\tLEAQ (%s)(%s), BX", r.base, r.off)
		}
		P("\tIQXA_ROW(%s)", r.acc)
	}
	T(`	IQX_HSUM16(Z8, Z9, Z10, Z11, X8)
	IQX_HSUM16(Z20, Z21, Z22, Z23, X1)
	VINSERTI128  $1, X1, Y8, Y8
	VPXOR        X4, X4, X4
	VPINSRW      $0, (DI), X4, X4
	LEAQ         (DI)(R8*1), BX
	VPINSRW      $1, (BX), X4, X4
	LEAQ         (DI)(R8*2), BX
	VPINSRW      $2, (BX), X4, X4
	LEAQ         (DI)(R10*1), BX
	VPINSRW      $3, (BX), X4, X4
	VPINSRW      $4, (R13), X4, X4
	LEAQ         (R13)(R8*1), BX
	VPINSRW      $5, (BX), X4, X4
	LEAQ         (R13)(R8*2), BX
	VPINSRW      $6, (BX), X4, X4
	LEAQ         (R13)(R10*1), BX
	VPINSRW      $7, (BX), X4, X4
	VCVTPH2PS    X4, Y6
	VMULPS       Y7, Y6, Y6
	VCVTDQ2PS    Y8, Y8
	VMULPS       Y6, Y8, Y8
	VADDPS       Y8, Y0, Y0
	ADDQ         $136, DI
	ADDQ         $136, R13
	ADDQ         $IQXA_BLOCK, SI
	DECQ         nb+32(FP)
	JNZ          iqx8Loop

	MOVQ    out+40(FP), DX
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET
`)
}
