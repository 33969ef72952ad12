package main

import (
	"fmt"
	"strings"
)

// genAttnQG writes attnqg_amd64.s: the grouped-query (GQA) variants of the
// fused q8_0/q4_0 attention kernels of attnq_amd64.s. The g query heads
// that share one KV head expand each block once and use it for all of
// them; the accumulation kernels also take P blocks per pass over the
// rows. Each head's operations are the single-head kernel's.
func genAttnQG() {
	T(`//go:build amd64 && !purego

#include "textflag.h"

// Grouped-query variants of attnq_amd64.s: the query heads that share one
// KV head expand each block once and use it for all of them.

`)
	for _, q := range []bool{true, false} {
		bb := 18 // q4_0 block bytes
		if q {
			bb = 34 // q8_0
		}
		for _, g := range []int{2, 4, 8} {
			attnScoresG(q, bb, g)
		}
		// 2*g*P accumulators in Z8..Z23.
		for _, g := range []int{1, 2, 4, 8} {
			for _, p := range []int{1, 2, 4} {
				if 2*g*p <= 16 {
					attnAccumG(q, bb, g, p)
				}
			}
		}
	}
	s := strings.TrimRight(out.String(), "\n")
	out.Reset()
	T(s + "\n")
}

// attnExpand expands the block at byte off of R12 into Z6 (values 0..15)
// and Z7 (16..31), times the block's f16 scale. The scores kernels write a
// zero offset as (R12), the accumulation kernels as 0(R12).
func attnExpand(q bool, off int, zero bool) {
	o := func(d int) string {
		if off+d == 0 && !zero {
			return ""
		}
		return fmt.Sprint(off + d)
	}
	P("\tVPBROADCASTW %s(R12), Y5", o(0))
	P("\tVCVTPH2PS    Y5, Z5")
	if q {
		P("\tVPMOVSXBD    %s(R12), Z6", o(2))
		P("\tVPMOVSXBD    %s(R12), Z7", o(18))
	} else {
		P("\tVPMOVZXBD    %s(R12), Z6", o(2))
		P("\tVPSRLD       $4, Z6, Z7")
		P("\tVPANDD       Z28, Z6, Z6")
		P("\tVPSUBD       Z29, Z6, Z6")
		P("\tVPSUBD       Z29, Z7, Z7")
	}
	P("\tVCVTDQ2PS    Z6, Z6")
	P("\tVCVTDQ2PS    Z7, Z7")
	P("\tVMULPS       Z5, Z6, Z6")
	P("\tVMULPS       Z5, Z7, Z7")
}

// attnQ4Consts loads the q4_0 nibble mask (Z28) and offset (Z29).
func attnQ4Consts() {
	T("\tMOVL         $15, AX\n\tVPBROADCASTD AX, Z28\n\tMOVL         $8, AX\n\tVPBROADCASTD AX, Z29\n")
}

func attnQName(q bool) string {
	if q {
		return "8"
	}
	return "4"
}

func attnScoresG(q bool, bb, g int) {
	qn := attnQName(q)
	name := fmt.Sprintf("sg%sx%d", qn, g)
	fn := fmt.Sprintf("attnScoresQ%sx%dAVX512", qn, g)
	acc := func(h, k int) string { return fmt.Sprintf("Z%d", 8+2*h+k) }
	P("// func %s(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)", fn)
	P("// %d query heads against one KV head: q is [block][head][32], dst", g)
	P("// [t][head]; each head's operations are attnScoresQ%sAVX512's.", qn)
	P("TEXT ·%s(SB), NOSPLIT, $0-52", fn)
	T(`	MOVQ         dst+0(FP), R15
	MOVQ         q+8(FP), SI
	MOVQ         kv+16(FP), R8
	MOVQ         offs+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         nb+40(FP), R9
	VBROADCASTSS scale+48(FP), Z31
`)
	if !q {
		attnQ4Consts()
	}
	P("\tXORQ         DX, DX")
	P("")
	P("%s_t:", name)
	P("\tCMPQ       DX, R11")
	P("\tJGE        %s_done", name)
	P("\tLEAQ       2(DX), R12")
	P("\tCMPQ       R12, R11")
	P("\tJGE        %s_nopf", name)
	T(`	MOVQ       (R10)(R12*8), R12
	ADDQ       R8, R12
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 128(R12)

`)
	P("%s_nopf:", name)
	P("\tMOVQ (R10)(DX*8), R12")
	P("\tADDQ R8, R12")
	for h := range g {
		P("\tVPXORD %s, %s, %s", acc(h, 0), acc(h, 0), acc(h, 0))
		P("\tVPXORD %s, %s, %s", acc(h, 1), acc(h, 1), acc(h, 1))
	}
	P("\tMOVQ SI, R13")
	P("\tMOVQ R9, CX")
	P("")
	P("%s_b:", name)
	attnExpand(q, 0, false)
	for h := range g {
		P("\tVFMADD231PS %d(R13), Z6, %s", h*128, acc(h, 0))
		P("\tVFMADD231PS %d(R13), Z7, %s", h*128+64, acc(h, 1))
	}
	P("\tADDQ $%d, R13", 128*g)
	P("\tADDQ $%d, R12", bb)
	P("\tDECQ CX")
	P("\tJNZ  %s_b", name)
	for h := range g {
		P("\tVADDPS        %s, %s, Z0", acc(h, 1), acc(h, 0))
		T(`	VEXTRACTF64X4 $1, Z0, Y30
	VADDPS        Y30, Y0, Y0
	VEXTRACTF32X4 $1, Y0, X30
	VADDPS        X30, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0
	VMULSS        X31, X0, X0
`)
		P("\tVMOVSS        X0, %d(R15)", 4*h)
	}
	P("\tADDQ $%d, R15", 4*g)
	P("\tINCQ DX")
	P("\tJMP  %s_t", name)
	P("")
	P("%s_done:", name)
	P("\tVZEROUPPER")
	P("\tRET")
	P("")
}

func attnAccumG(q bool, bb, g, np int) {
	qn := attnQName(q)
	name := fmt.Sprintf("ag%sx%dp%d", qn, g, np)
	fn := fmt.Sprintf("attnAccumQ%sx%dp%dAVX512", qn, g, np)
	a := func(p, h, k int) string { return fmt.Sprintf("Z%d", 8+(p*g+h)*2+k) }
	P("// func %s(out, w *float32, kv *byte, offs *int, n, nb int)", fn)
	P("// %d query head(s)' value sums over one KV head, %d block(s) per pass over", g, np)
	P("// the rows (nb a multiple of %d): out is [block][head][32], w [t][head];", np)
	P("// each element is one FMA chain over t, as in attnAccumAVX512.")
	P("TEXT ·%s(SB), NOSPLIT, $0-48", fn)
	T(`	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ kv+16(FP), R8
	MOVQ offs+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ nb+40(FP), R9
`)
	if !q {
		attnQ4Consts()
	}
	P("\tXORQ BX, BX")
	P("")
	P("%s_blk:", name)
	P("\tCMPQ R9, $0")
	P("\tJLE  %s_done", name)
	for p := range np {
		for h := range g {
			P("\tVMOVUPS %d(DI), %s", (p*g+h)*128, a(p, h, 0))
			P("\tVMOVUPS %d(DI), %s", (p*g+h)*128+64, a(p, h, 1))
		}
	}
	P("\tXORQ DX, DX")
	P("\tMOVQ SI, R15")
	P("")
	P("%s_t:", name)
	P("\tCMPQ       DX, R11")
	P("\tJGE        %s_st", name)
	P("\tLEAQ       4(DX), R12")
	P("\tCMPQ       R12, R11")
	P("\tJGE        %s_nopf", name)
	T(`	MOVQ       (R10)(R12*8), R12
	ADDQ       R8, R12
	PREFETCHT0 (R12)(BX*1)
	PREFETCHT0 64(R12)(BX*1)
`)
	if np*bb > 128 {
		P("\tPREFETCHT0 128(R12)(BX*1)")
	}
	P("")
	P("%s_nopf:", name)
	P("\tMOVQ (R10)(DX*8), R12")
	P("\tADDQ R8, R12")
	P("\tADDQ BX, R12")
	for p := range np {
		attnExpand(q, p*bb, true)
		for h := range g {
			P("\tVBROADCASTSS %d(R15), Z24", 4*h)
			P("\tVFMADD231PS  Z6, Z24, %s", a(p, h, 0))
			P("\tVFMADD231PS  Z7, Z24, %s", a(p, h, 1))
		}
	}
	P("\tADDQ $%d, R15", 4*g)
	P("\tINCQ DX")
	P("\tJMP  %s_t", name)
	P("")
	P("%s_st:", name)
	for p := range np {
		for h := range g {
			P("\tVMOVUPS %s, %d(DI)", a(p, h, 0), (p*g+h)*128)
			P("\tVMOVUPS %s, %d(DI)", a(p, h, 1), (p*g+h)*128+64)
		}
	}
	P("\tADDQ $%d, DI", 128*g*np)
	P("\tADDQ $%d, BX", bb*np)
	P("\tSUBQ $%d, R9", np)
	P("\tJMP  %s_blk", name)
	P("")
	P("%s_done:", name)
	P("\tVZEROUPPER")
	P("\tRET")
	P("")
}
