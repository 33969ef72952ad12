package main

import (
	"fmt"
	"strings"
)

// genKQuantLow writes kquant_low_amd64.s: the Q2_K and Q3_K dot products.
// Both types walk the same eight 32-value chunks (two 32-byte loads of bit
// pairs, four shifts each; Q3_K adds an hmask bit per chunk), written by
// kqlChunks for the pair macros of the Dot4 kernels and, against four
// activation rows, the bodies of the Row4 kernels; each comes as AVX2 and
// as VNNI (VPDPWSSD fusing the scale multiply-add).
func genKQuantLow() {
	T(kqlIntro)
	for _, vnni := range []bool{false, true} {
		for _, q3 := range []bool{false, true} {
			kqlPairMacro(q3, vnni)
			P("")
		}
	}
	first := true
	for _, vnni := range []bool{false, true} {
		for _, row4 := range []bool{false, true} {
			for _, q3 := range []bool{false, true} {
				if !first {
					P("")
				}
				first = false
				kqlKernel(q3, row4, vnni)
			}
		}
	}
}

// kqlChunks is the eight chunks of a super-block's values from the weight
// block at base (BX or DI), each extracted into Y3 and multiplied by
// part(off), off the chunk's activation offset.
func kqlChunks(q3, vnni bool, base string, part func(off int) string) []string {
	var l []string
	for h := range 2 {
		off := 16 + 32*h
		if q3 {
			off = 32 + 32*h
		}
		l = append(l, fmt.Sprintf("VMOVDQU      (%d)(%s), Y2", off, base))
		for j := range 4 {
			c := 4*h + j
			switch {
			case !q3 && j == 0:
				l = append(l, "Q2K_BITS0")
			case !q3:
				l = append(l, fmt.Sprintf("Q2K_BITS(%d)", 2*j))
			default:
				// hmask bit c moved to bit 2.
				m := "Q3K_BITS"
				if vnni {
					m = "Q3K_BITSV"
				}
				op, hn := "VPSRLW", c-2
				if hn < 0 {
					op, hn = "VPSLLW", -hn
				}
				switch {
				case j == 0:
					l = append(l, fmt.Sprintf("%s_L0(%s, %d)", m, op, hn))
				case hn == 0:
					l = append(l, fmt.Sprintf("%s_H0(%d)", m, 2*j))
				default:
					l = append(l, fmt.Sprintf("%s(%d, %s, %d)", m, 2*j, op, hn))
				}
			}
			l = append(l, part(32*c))
		}
	}
	return l
}

func kqlName(q3 bool) string {
	if q3 {
		return "Q3K"
	}
	return "Q2K"
}

func kqlV(vnni bool) string {
	if vnni {
		return "V"
	}
	return ""
}

// kqlPairMacro writes Q2K_PAIR / Q3K_PAIR (and their VNNI forms): one
// super-block of one Dot4 pair.
func kqlPairMacro(q3, vnni bool) {
	v := kqlV(vnni)
	spread := "Y5"
	var l []string
	if q3 {
		spread = "Y13"
		P("#define Q3K_PAIR%s(acc) \\", v)
		l = []string{
			"PREFETCHT0   (BX)(R8*4)",
			"PREFETCHT0   64(BX)(R8*4)",
			"PREFETCHT0   109(BX)(R8*4)",
			"Q3K_SCALES(BX)",
			"VPMADDWD     ACT_SUMS16(AX), Y2, Y3",
			"VPSLLD       $2, Y3, Y3",
			"VPXOR        acc, acc, acc",
			"VPSUBD       Y3, acc, acc",
			"VMOVDQU      (BX), Y4",
		}
	} else {
		P("#define Q2K_PAIR%s(acc, mins) \\", v)
		l = []string{
			"PREFETCHT0   (BX)(R8*4)",
			"PREFETCHT0   83(BX)(R8*4)",
			"Q2K_SCALES(BX, mins)",
			"VPMADDWD     ACT_SUMS16(AX), mins, mins",
			"VPXOR        acc, acc, acc",
		}
	}
	l = append(l, kqlChunks(q3, vnni, "BX", func(off int) string {
		return fmt.Sprintf("PART%s(%d, acc, %s)", v, off, spread)
	})...)
	T("\t" + strings.Join(l, " \\\n\t") + "\n")
}

// kqlKernel writes kq{Q2K,Q3K}{Dot4,Row4}{AVX2,VNNI}.
func kqlKernel(q3, row4, vnni bool) {
	t := kqlName(q3)
	shape, isa := "Dot4", "AVX2"
	if row4 {
		shape = "Row4"
	}
	if vnni {
		isa = "VNNI"
	}
	name := "kq" + t + shape + isa
	tn := t[:2] + "_K"
	P("// func %s%s", name, kqSig)
	P("//")
	switch {
	case !row4 && !vnni:
		P("// Four %s weight rows against one activation row.", tn)
	case !row4:
		P("// Four %s weight rows against one activation row,", tn)
		P("// with AVX-512 VNNI's VPDPWSSD fusing the scale multiply-add.")
	case !vnni:
		P("// One %s weight row against four activation rows (ws is ignored):", tn)
		P("// the scales and the weight values are decoded once for the four.")
	default:
		P("// One %s weight row against four activation rows (ws is ignored)", tn)
		P("// with AVX-512 VNNI's VPDPWSSD fusing the scale multiply-add:")
		P("// the scales and the weight values are decoded once for the four.")
	}
	P("TEXT ·%s(SB), NOSPLIT, $32-48", name)
	P("\tMOVQ w+0(FP), DI")
	if row4 {
		P("\tXORQ R8, R8")
		P("\tXORQ R10, R10")
	} else {
		P("\tMOVQ ws+8(FP), R8")
		P("\tLEAQ (R8)(R8*2), R10")
	}
	P("\tMOVQ a+16(FP), SI")
	P("\tMOVQ as+24(FP), R9")
	P("\tLEAQ (R9)(R9*2), R11")
	P("\tVMOVDQU kqlMask03<>(SB), Y1")
	P("\tVXORPS X0, X0, X0")
	if q3 {
		P("\tVMOVDQU kqlMask04<>(SB), Y12")
		P("\tVMOVDQU kqlSpread2<>(SB), Y13")
		if vnni {
			P("\tVMOVDQU kqlMask07<>(SB), Y14")
		}
	}
	P("")
	P("loop%s:", name)
	if !q3 {
		P("\tVMOVDQU kqlSpread2<>(SB), Y5")
	}
	v := kqlV(vnni)
	if !row4 {
		for k := range 4 {
			P("\tPAIR%d", k)
			if q3 {
				P("\tQ3K_PAIR%s(Y%d)", v, 8+k)
			} else {
				P("\tQ2K_PAIR%s(Y%d, Y%d)", v, 8+k, 12+k)
			}
		}
	} else {
		spread := "Y5"
		if q3 {
			spread = "Y13"
			P("\tQ3K_SCALES(DI)")
			for r := range 4 {
				acc := 8 + r
				P("\tVPMADDWD ACT_SUMS16(SI)%s, Y2, Y3", kqActRow[r])
				P("\tVPSLLD $2, Y3, Y3")
				P("\tVPXOR Y%d, Y%d, Y%d", acc, acc, acc)
				P("\tVPSUBD Y3, Y%d, Y%d", acc, acc)
			}
			P("\tVMOVDQU (DI), Y4")
		} else {
			P("\tQ2K_SCALES(DI, Y4)")
			for r := range 4 {
				P("\tVPMADDWD ACT_SUMS16(SI)%s, Y4, Y%d", kqActRow[r], 12+r)
			}
			for r := range 4 {
				P("\tVPXOR Y%d, Y%d, Y%d", 8+r, 8+r, 8+r)
			}
		}
		for _, s := range kqlChunks(q3, vnni, "DI", func(off int) string {
			return fmt.Sprintf("R4PART%s(%d, %s)", v, off, spread)
		}) {
			P("\t%s", s)
		}
	}
	P("\t%s_FINISH", t)
	P("")
	wb := "84"
	if q3 {
		wb = "110"
	}
	kqEnd("loop"+name, wb, "$ACT_BLOCK")
}
