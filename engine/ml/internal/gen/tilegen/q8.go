package main

// genQ8 writes kernels_q8_amd64.s, the AVX-512 VNNI and AVX2 kernels of the
// integer Q8_0 product: the activation quantizer, the tile packer, the tile
// products (unrolled per activation count, otherwise identical) and the
// matvecs (gemv16 with the other 32-value layouts' in expand.go).
func genQ8() {
	q8Header()
	quantAct()
	pack()
	tiles()
	gemvVNNI()
	gemvAVX2()
}

func q8Header() {
	P(headerText)
	P("DATA q8iota<>+0(SB)/4, $0")
	for i := 1; i < 16; i++ {
		P("DATA q8iota<>+%d(SB)/4, $%d", 4*i, i)
	}
	P(iotaEnd)
}

func quantAct() {
	P(quantPackText)
}

// pack writes packQ8Tile's loads and stores (its head is in quantPackText).
func pack() {
	k := 0
	for _, off := range []int{2, 18} {
		for _, ix := range []string{"", "(CX*1)", "(CX*2)", "(DX*1)"} {
			P("\tVMOVDQU      %d(SI)%s, X%d", off, ix, k)
			for l, base := range []string{"R8", "R9", "R10"} {
				P("\tVINSERTI32X4 $%d, %d(%s)%s, Z%d, Z%d", l+1, off, base, ix, k, k)
			}
			k++
		}
	}
	P(tr4Text)
	for j := 0; j < 8; j++ {
		P("\tVPXORD    Z27, Z%d, Z%d", j, j)
		P("\tVMOVDQU32 Z%d, %d(DI)", j, 64*j)
	}
	P(packTail)
}

var idx = []string{"", "(CX*1)", "(CX*2)", "(DX*1)"}

// tiles writes gemmQ8x8, gemmQ8x4 and gemmQ8x1.
func tiles() {
	for _, A := range []int{8, 4, 1} {
		P(`// func gemmQ8x%d(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)
// dst[a*ds+r] = the Q8 product of activation row a (quantized blocks at
// x + a*xs) and row r of the packed tile w, for a < %d and the rows r < 16
// set in mask. One int32 accumulator per activation holds a block's sums
// for the 16 rows (one per lane); it is then scaled into the f32 sums.
TEXT ·gemmQ8x%d(SB), NOSPLIT, $0-50
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), CX
	LEAQ (CX)(CX*2), DX
	LEAQ (SI)(CX*4), R8
	MOVQ w+16(FP), DI
	MOVQ nb+24(FP), BX
`, A, A, A)
		for a := 0; a < A; a++ {
			P("\tVPXORD Z%d, Z%d, Z%d", 8+a, 8+a, 8+a)
		}
		P("\ng%dloop:", A)
		for a := 0; a < A; a++ {
			P("\tVPBROADCASTD %s, Z%d", act(a, 4), a)
		}
		for j := 0; j < 8; j++ {
			P("\tVMOVDQU32 %d(DI), Z16", 64*j)
			for a := 0; a < A; a++ {
				P("\tVPDPBUSD.BCST %s, Z16, Z%d", act(a, 8+4*j), a)
			}
		}
		P("\tVMOVUPS 512(DI), Z17")
		for a := 0; a < A; a++ {
			P("\tVCVTDQ2PS     Z%d, Z%d", a, a)
			P("\tVMULPS.BCST   %s, Z17, Z18", act(a, 0))
			P("\tVMULPS        Z18, Z%d, Z%d", a, a)
			P("\tVADDPS        Z%d, Z%d, Z%d", a, 8+a, 8+a)
		}
		P("\tADDQ $40, SI")
		if A > 4 {
			P("\tADDQ $40, R8")
		}
		P("\tADDQ $576, DI")
		P("\tDECQ BX")
		P("\tJNZ  g%dloop", A)
		P(storeHead)
		for a := 0; a < A; a++ {
			base := "AX"
			if a >= 4 {
				base = "R8"
			}
			P("\tVMOVUPS Z%d, K1, (%s)%s", 8+a, base, idx[a%4])
		}
		P(retText)
	}
}
