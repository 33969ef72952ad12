package main

import "fmt"

// The K-quant tile GEMM family: one activation row per accumulator, the 16
// weight rows of the expanded tile in the lanes of each vector. One
// description per block layout; the tile shape (4 or 8 activation rows) is
// the unroll count.

// kLayout is an expanded K-quant tile as the expander writes it.
type kLayout struct {
	name   string // Q4K, Q6K: the functions are gemm<name>x<n>
	label  string // loop label prefix
	groups int    // value groups, each with its own int32 scale
	dwords int    // dwords (4 values) per group and row
	scales int    // offset of the int32 scales, 64 bytes per group
	pairs  int    // offset of the 8 int16-pair vectors multiplied by the block sums
	stride int    // bytes per expanded super-block
	final  func(l kLayout, n int)
}

// q8KBsums is the offset of the 16 int16 block sums in a Q8_K activation
// block (after f32 d and the 256 quants); q8KSize is the block size.
const (
	q8KD     = 256
	q8KBsums = 260
	q8KSize  = 292
)

// gemmK writes gemm<name>x<n>: for each super-block, per value group the
// VPDPBUSD sums scaled by the group's scale (VPMULLD) into Z8+i, the block
// sums times the pairs (VPDPWSSD) into Zi, then l.final folds both into the
// f32 accumulators Z16+i.
func gemmK(l kLayout, n int) {
	label := l.label + "x" + itoa(n) + "loop"
	P("")
	P("// func gemm%sx%d(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)", l.name, n)
	P("TEXT ·gemm%sx%d(SB), NOSPLIT, $0-50", l.name, n)
	tileArgs()
	P("\tMOVQ nb+24(FP), BX")
	for i := range n {
		P("\tVPXORD Z%d, Z%d, Z%d", 16+i, 16+i, 16+i)
	}
	P("")
	P("%s:", label)
	zero := func() {
		for i := range n {
			P("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
		}
	}
	for g := range l.groups {
		zero()
		for k := range l.dwords {
			d := g*l.dwords + k
			P("\tVMOVDQU32 %d(DI), Z24", 64*d)
			for i := range n {
				P("\tVPDPBUSD.BCST %s, Z24, Z%d", act(i, 4*d), i)
			}
		}
		P("\tVMOVDQU32 %d(DI), Z25", l.scales+64*g)
		for i := range n {
			if g == 0 {
				P("\tVPMULLD Z25, Z%d, Z%d", i, 8+i)
			} else {
				P("\tVPMULLD Z25, Z%d, Z%d", i, i)
				P("\tVPADDD Z%d, Z%d, Z%d", i, 8+i, 8+i)
			}
		}
	}
	zero()
	for p := range 8 {
		P("\tVMOVDQU32 %d(DI), Z24", l.pairs+64*p)
		for i := range n {
			P("\tVPDPWSSD.BCST %s, Z24, Z%d", act(i, q8KBsums+4*p), i)
		}
	}
	l.final(l, n)
	P("\tADDQ $%d, SI", q8KSize)
	P("\tADDQ $%d, R8", q8KSize)
	P("\tADDQ $%d, DI", l.stride)
	P("\tDECQ BX")
	P("\tJNZ  %s", label)
	storeTile(n, 16, 32)
}

// tileArgs loads x (SI), xs (CX), 3*xs (DX), x+4*xs (R8) and w (DI), the
// first arguments of every tile GEMM.
func tileArgs() {
	P("\tMOVQ x+0(FP), SI")
	P("\tMOVQ xs+8(FP), CX")
	P("\tLEAQ (CX)(CX*2), DX")
	P("\tLEAQ (SI)(CX*4), R8")
	P("\tMOVQ w+16(FP), DI")
}

// storeTile writes the n accumulators Z(acc).. to dst rows ds apart, the
// lanes set in mask only; dst, ds and mask are the arguments at frame
// offsets arg, arg+8 and arg+16.
func storeTile(n, acc, arg int) {
	P("\tMOVQ  dst+%d(FP), AX", arg)
	P("\tMOVQ  ds+%d(FP), CX", arg+8)
	P("\tSHLQ  $2, CX")
	P("\tLEAQ  (CX)(CX*2), DX")
	P("\tLEAQ  (AX)(CX*4), R8")
	P("\tMOVWLZX mask+%d(FP), BX", arg+16)
	P("\tKMOVW BX, K1")
	for i := range n {
		P("\tVMOVUPS Z%d, K1, %s", acc+i, dstRow(i))
	}
	P("\tVZEROUPPER")
	P("\tRET")
}

// finalDMin is Q4_K/Q5_K's: acc + (d*dx*isum - dmin*dx*msum), with d at
// l.stride-128 and dmin at l.stride-64.
func finalDMin(l kLayout, n int) {
	P("\tVMOVUPS %d(DI), Z28", l.stride-128)
	P("\tVMOVUPS %d(DI), Z27", l.stride-64)
	for i := range n {
		P("\tVBROADCASTSS %s, Z26", act(i, q8KD))
		P("\tVMULPS Z26, Z28, Z29")
		P("\tVMULPS Z26, Z27, Z30")
		P("\tVCVTDQ2PS Z%d, Z25", 8+i)
		P("\tVMULPS Z25, Z29, Z25")
		P("\tVCVTDQ2PS Z%d, Z%d", i, i)
		P("\tVMULPS Z%d, Z30, Z%d", i, i)
		P("\tVSUBPS Z%d, Z25, Z25", i)
		P("\tVADDPS Z25, Z%d, Z%d", 16+i, 16+i)
	}
}

// finalMinus32 is Q6_K's: the values were stored plus 32, so isum - 32*msum
// is the exact integer product, then acc + d*dx*that.
func finalMinus32(l kLayout, n int) {
	P("\tVMOVUPS %d(DI), Z28", l.stride-64)
	for i := range n {
		P("\tVPSLLD $5, Z%d, Z%d", i, i)
		P("\tVPSUBD Z%d, Z%d, Z%d", i, 8+i, 8+i)
		P("\tVMULPS.BCST %s, Z28, Z29", act(i, q8KD))
		P("\tVCVTDQ2PS Z%d, Z25", 8+i)
		P("\tVMULPS Z25, Z29, Z25")
		P("\tVADDPS Z25, Z%d, Z%d", 16+i, 16+i)
	}
}

var (
	q4kLayout = kLayout{name: "Q4K", label: "gq4k", groups: 8, dwords: 8, scales: 4096, pairs: 4608, stride: 5248, final: finalDMin}
	q6kLayout = kLayout{name: "Q6K", label: "gq6k", groups: 16, dwords: 4, scales: 4096, pairs: 5120, stride: 5696, final: finalMinus32}
)

func itoa(i int) string { return fmt.Sprint(i) }
