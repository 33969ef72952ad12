package main

// Tile GEMMs over packed Q8_0-shaped tiles (packQ8Tile: per 32-value block
// 8 vectors of 16 rows x 4 biased bytes, then the rows' f32 block scales),
// with an activation-side bias term that starts each int32 accumulator.

// genIQ4XS writes gemmIQ4XSx4 and gemmIQ4XSx8: eight 32-value blocks per
// super-block, each scaled by its int32 sub-block scale, against Q8_K
// activations whose -128*(bsum pair) biases are computed once per
// super-block into the frame (32 bytes per activation row).
func genIQ4XS() {
	T(iq4xsIntro)
	for _, n := range []int{4, 8} {
		gemmIQ4XS(n)
	}
}

func gemmIQ4XS(n int) {
	label := "gx" + itoa(n) + "loop"
	P("")
	P("// func gemmIQ4XSx%d(x *byte, xs int, w *byte, d *byte, nb int, dst *float32, ds int, mask uint16)", n)
	P("TEXT ·gemmIQ4XSx%d(SB), NOSPLIT, $%d-58", n, 32*n)
	tileArgs()
	P("\tMOVQ d+24(FP), R9")
	P("\tMOVQ nb+32(FP), BX")
	P("\tVPBROADCASTD iqxOnes16<>(SB), Z27")
	P("\tVPXORD Z28, Z28, Z28")
	for i := range n {
		P("\tVPXORD Z%d, Z%d, Z%d", 16+i, 16+i, 16+i)
	}
	P("")
	P("%s:", label)
	// bias[ib] = -128*(bsum[2ib] + bsum[2ib+1]) for the 8 blocks of row i.
	for i := range n {
		P("\tVMOVDQU32 %s, Y26", act(i, q8KBsums))
		P("\tVPMADDWD Y27, Y26, Y26")
		P("\tVPSLLD $7, Y26, Y26")
		P("\tVPSUBD Y26, Y28, Y26")
		P("\tVMOVDQU32 Y26, %d(SP)", 32*i)
	}
	for i := range n {
		P("\tVPXORD Z%d, Z%d, Z%d", 8+i, 8+i, 8+i)
	}
	const block = 576 // 8 value vectors and the scales
	for ib := range 8 {
		for i := range n {
			P("\tVPBROADCASTD %d(SP), Z%d", 32*i+4*ib, i)
		}
		for k := range 8 {
			P("\tVMOVDQU32 %d(DI), Z24", block*ib+64*k)
			for i := range n {
				P("\tVPDPBUSD.BCST %s, Z24, Z%d", act(i, 32*ib+4*k), i)
			}
		}
		P("\tVCVTPS2DQ %d(DI), Z25", block*ib+512)
		for i := range n {
			P("\tVPMULLD Z25, Z%d, Z%d", i, i)
			P("\tVPADDD Z%d, Z%d, Z%d", i, 8+i, 8+i)
		}
	}
	P("\tVCVTPH2PS (R9), Z26")
	for i := range n {
		P("\tVMULPS.BCST %s, Z26, Z29", act(i, q8KD))
		P("\tVCVTDQ2PS Z%d, Z30", 8+i)
		P("\tVMULPS Z30, Z29, Z30")
		P("\tVADDPS Z30, Z%d, Z%d", 16+i, 16+i)
	}
	P("\tADDQ $%d, SI", q8KSize)
	P("\tADDQ $%d, R8", q8KSize)
	P("\tADDQ $%d, DI", 8*block)
	P("\tADDQ $32, R9")
	P("\tDECQ BX")
	P("\tJNZ  %s", label)
	storeTile(n, 16, 40)
}

// genQ41 writes gemmOffx4 and gemmOffx8, the Q4_1/Q5_1 products: one
// 32-value block per step against Q8_1-shaped activations (f32 d, int32
// bias -128*sum(q), 32 quants: 40 bytes), with the offset term m*sum(q).
func genQ41() {
	T(q41Intro)
	for _, n := range []int{4, 8} {
		gemmOff(n)
	}
}

func gemmOff(n int) {
	label := "goff" + itoa(n) + "loop"
	P("")
	P("// func gemmOffx%d(x *byte, xs int, w *byte, m *uint16, nb int, dst *float32, ds int, mask uint16)", n)
	P("TEXT ·gemmOffx%d(SB), NOSPLIT, $0-58", n)
	tileArgs()
	P("\tMOVQ m+24(FP), R9")
	P("\tMOVQ nb+32(FP), BX")
	for i := range n {
		P("\tVPXORD Z%d, Z%d, Z%d", 8+i, 8+i, 8+i)
	}
	P("")
	P("%s:", label)
	for i := range n {
		P("\tVPBROADCASTD %s, Z%d", act(i, 4), i)
	}
	for k := range 8 {
		P("\tVMOVDQU32 %d(DI), Z16", 64*k)
		for i := range n {
			P("\tVPDPBUSD.BCST %s, Z16, Z%d", act(i, 8+4*k), i)
		}
	}
	P("\tVMOVUPS 512(DI), Z17")
	P("\tVCVTPH2PS (R9), Z19")
	for i := range n {
		P("\tVCVTDQ2PS Z%d, Z%d", i, i)
		P("\tVMULPS.BCST %s, Z17, Z18", act(i, 0))
		P("\tVMULPS Z18, Z%d, Z%d", i, i)
		P("\tVADDPS Z%d, Z%d, Z%d", i, 8+i, 8+i)
		P("\tVPBROADCASTD %s, Z20", act(i, 4))
		P("\tVPSRAD $7, Z20, Z20")
		P("\tVCVTDQ2PS Z20, Z20")
		P("\tVMULPS.BCST %s, Z19, Z18", act(i, 0))
		P("\tVMULPS Z18, Z20, Z20")
		P("\tVSUBPS Z20, Z%d, Z%d", 8+i, 8+i)
	}
	P("\tADDQ $40, SI")
	P("\tADDQ $40, R8")
	P("\tADDQ $576, DI")
	P("\tADDQ $32, R9")
	P("\tDECQ BX")
	P("\tJNZ  %s", label)
	storeTile(n, 8, 40)
}
