package main

import (
	"fmt"
)

// genQ41Kernels writes q41_amd64.s: the Q4_1 and Q5_1 matvecs (four-output
// AVX2, 16-row VNNI, 8-row AVX2) and expanders. The 16-row kernels are the
// gemv16 family of expand.go and q8gemv.go (row pairs k, k+4 per
// accumulator, gemv16.go's reduction tree); Q4_1 and Q5_1 differ in the
// block size, the offset of the nibbles and Q5_1's high bits.
func genQ41Kernels() {
	T(q41kIntro)
	P("#define G41_PREFETCH \\")
	var pf []string
	for r := range 16 {
		pf = append(pf, fmt.Sprintf("PREFETCHT0 (R%d)%s", 11+r/4, rowIdx[r%4]))
	}
	macroBody(pf)
	P("")
	P("// The 16 rows' (d, m) dwords into Z26, by row groups of four.")
	P("#define G41_GATHER \\")
	var g []string
	for grp, base := range []string{"SI", "R8", "R9", "R10"} {
		x := "X25"
		if grp == 0 {
			x = "X26"
		}
		g = append(g, fmt.Sprintf("VMOVD        (%s), %s", base, x))
		for r := 1; r < 4; r++ {
			g = append(g, fmt.Sprintf("VPINSRD      $%d, (%s)%s, %s, %s", r, base, rowIdx[r], x, x))
		}
		if grp > 0 {
			g = append(g, fmt.Sprintf("VINSERTI32X4 $%d, X25, Z26, Z26", grp))
		}
	}
	macroBody(g)
	T(q41Pairs)
	P("#define G41_FINISH \\")
	gemv16Reduce(func(format string, args ...any) { P(format+" \\", args...) })
	T(q41Finish)
	for i, q5 := range []bool{false, true} {
		if i > 0 {
			P("")
		}
		q41Dot4(q5)
	}
	for _, q5 := range []bool{false, true} {
		P("")
		q41GemvVNNI(q5)
	}
	P("")
	T(q41Expand)
	for i, q5 := range []bool{false, true} {
		if i > 0 {
			P("")
		}
		q41GemvAVX2(q5)
	}
}

// macroBody writes the lines of a #define body, continued with " \".
func macroBody(lines []string) {
	for i, l := range lines {
		if i < len(lines)-1 {
			P("\t%s \\", l)
		} else {
			P("\t%s", l)
		}
	}
}

func q41Kind(q5 bool) (name string, bytes int) {
	if q5 {
		return "51", 24
	}
	return "41", 20
}

// q41Dot4 writes kqQ41Dot4AVX2 / kqQ51Dot4AVX2: output k is weight row
// w + k*ws against activation row a + k*as (kqQ40Dot4AVX2's shape).
func q41Dot4(q5 bool) {
	n, bb := q41Kind(q5)
	name := "kqQ" + n + "Dot4AVX2"
	P("// func %s%s", name, kqSig)
	P("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	T(`	MOVQ    w+0(FP), DI
	MOVQ    ws+8(FP), R8
	MOVQ    a+16(FP), SI
	MOVQ    as+24(FP), R9
	MOVQ    nb+32(FP), CX
	LEAQ    (R8)(R8*2), R10
	LEAQ    (R9)(R9*2), R11
	VMOVDQU q41Mask0F<>(SB), Y1
`)
	if q5 {
		P("\tVMOVDQU q41QhSpread<>(SB), Y12")
	}
	P("\tVMOVDQU q41Ones16<>(SB), Y13")
	if q5 {
		P("\tVMOVDQU q41Bits<>(SB), Y14")
		P("\tVMOVDQU q41Sixteens<>(SB), Y15")
	}
	P("\tVXORPS  X0, X0, X0")
	P("")
	P("q%sLoop:", n)
	for k := range 4 {
		P("\tQ41_P%d", k)
		P("\tQ%s_PAIR(Y%d)", n, 8+k)
	}
	P("\tQ41_HSUM(Y8, Y9, Y10, Y11, X8, X9)")
	P("\tQ41_FINISH")
	P("\tADDQ $%d, DI", bb)
	P("\tADDQ $40, SI")
	P("\tDECQ CX")
	P("\tJNZ  q%sLoop", n)
	P("")
	P("\tMOVQ    out+40(FP), DX")
	P("\tVMOVUPS X0, (DX)")
	P("\tVZEROUPPER")
	P("\tRET")
}

// q41GemvVNNI writes gemvQ41VNNI / gemvQ51VNNI: 16 rows, a row pair per
// accumulator (gemv16Pair).
func q41GemvVNNI(q5 bool) {
	n, bb := q41Kind(q5)
	name := "gemvQ" + n + "VNNI"
	P("// func %s(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)", name)
	P("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	P("\tG41_PROLOGUE")
	if q5 {
		T(`	VBROADCASTI64X4 q41QhSpread<>(SB), Z28
	VBROADCASTI64X4 q41Bits<>(SB), Z29
	VPBROADCASTD    q41Sixteens<>(SB), Z24
	MOVL            $0xff00, AX
	KMOVW           AX, K3
`)
	}
	P("")
	P("g%sloop:", n)
	P("\tG41_PREFETCH")
	P("\tG41_GATHER")
	P("\tVBROADCASTI64X4 8(DI), Z30")
	for k := range 8 {
		lo, hi := gemv16Pair(k)
		regs := fmt.Sprintf("X%d, Z%d, Z%d", k, k, 18+k%4)
		if q5 {
			P("\tG51_PAIR(%s, %s, %s, %s, %s, Z%d, Z%d)", rowAddr(lo, 8), rowAddr(hi, 8),
				rowAddr(lo, 4), rowAddr(hi, 4), regs, 22+k%2, 8+k)
		} else {
			P("\tG41_PAIR(%s, %s, %s, Z%d)", rowAddr(lo, 4), rowAddr(hi, 4), regs, 8+k)
		}
	}
	P("\tG41_FINISH")
	P("\tG41_ADVANCE(%d)", bb)
	P("\tDECQ BX")
	P("\tJNZ  g%sloop", n)
	P("\tG41_STORE")
}

// q41GemvAVX2 writes gemvQ41AVX2 / gemvQ51AVX2: eight rows, one G8_ROW
// each.
func q41GemvAVX2(q5 bool) {
	n, bb := q41Kind(q5)
	name := "gemvQ" + n + "AVX2"
	P("// func %s(w *byte, rb int, nb int, x *byte, dst *float32)", name)
	P("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	P("\tG8_PROLOGUE")
	if q5 {
		P("\tVMOVDQU q41QhSpread<>(SB), Y13")
		P("\tVMOVDQU q41Bits<>(SB), Y14")
	}
	P("")
	P("g8%sloop:", n)
	P("\tVMOVDQU 8(DI), Y10")
	for k := range 8 {
		if q5 {
			P("\tG8_ROW51(%s, %s, Y%d)", rowAddr(k, 8), rowAddr(k, 4), k)
		} else {
			P("\tG8_ROW41(%s, Y%d)", rowAddr(k, 4), k)
		}
	}
	P("\tG8_FINISH")
	P("\tADDQ $%d, SI", bb)
	P("\tADDQ $%d, R8", bb)
	T(`	ADDQ $40, DI
	DECQ BX
`)
	P("\tJNZ  g8%sloop", n)
	T(`
	MOVQ    dst+32(FP), AX
	VMOVUPS Y15, (AX)
	VZEROUPPER
	RET
`)
}
