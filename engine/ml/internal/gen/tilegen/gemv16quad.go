package main

// exGemv16Quad writes the 16-row matvec of a nibble layout without high
// bits (MXFP4, IQ4_NL, Q4_0): exGemv16's, rearranged. A register holds
// one block of four rows (rows g, g+4, g+8, g+12 in its 128-bit lanes), so
// the low nibbles are values 0..15 and the high ones (one shift) values
// 16..31 of all four rows, and each meets a broadcast half of the
// activation block: no lane rotation, and for the code books no mask,
// since VPERMB looks up the low six bits of each byte in the code book
// repeated four times (Q4_0's nibbles are masked instead). Each
// accumulator then holds four partial sums of four rows, and the
// reduction of the four is 9 operations to exGemv16's 15 (8 accumulators
// of two rows), with the rows in order. One thread, 2880x2880 MXFP4:
// 17.3-18.2 to 24.3-25.1 cpu-GB/s.
func exGemv16Quad(l exLayout) {
	l = l.gemvDefaults()
	P("// func %s(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)", l.gemv)
	T(l.gdoc)
	P("TEXT ·%s(SB), NOSPLIT, $0-56", l.gemv)
	T(`	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPXORD       Z31, Z31, Z31
`)
	T(l.gconsts)
	if l.plain {
		P("\tVPBROADCASTD    %s<>(SB), Z29", l.mask)
	}
	T(`	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

`)
	// Two blocks a step, the prefetches once a step: 34 bytes apart, they
	// still reach every line of each row.
	P("\tCMPQ            BX, $2")
	P("\tJB              %stail", l.glabel)
	P("%s:", l.glabel)
	// Into the L2 cache, as exGemv16's.
	for r := range 16 {
		P("\tPREFETCHT1      (R%d)%s", 11+r/4, rowIdx[r%4])
	}
	exGemv16QuadBlock(l)
	exGemv16QuadBlock(l)
	for _, r := range []string{"R11", "R12", "R13", "R14"} {
		P("\tADDQ            $%d, %s", 2*l.bytes, r)
	}
	P("\tSUBQ            $2, BX")
	P("\tCMPQ            BX, $2")
	P("\tJAE             %s", l.glabel)
	P("")
	P("%stail:", l.glabel)
	P("\tTESTQ           BX, BX")
	P("\tJZ              %sstore", l.glabel)
	exGemv16QuadBlock(l)
	P("")
	P("%sstore:", l.glabel)
	T(`	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET
`)
}

// exGemv16QuadBlock writes one block step of exGemv16Quad for the 16 rows at SI,
// R8, R9, R10 and the activation block at DI, and advances them.
func exGemv16QuadBlock(l exLayout) {
	l.gscales(P)
	P("\tVBROADCASTI32X4 8(DI), Z30")
	P("\tVBROADCASTI32X4 24(DI), Z28")
	for g := range 4 {
		P("\tVMOVDQU         %s, X%d", rowAddr(g, l.nib), g)
		for r := 1; r < 4; r++ {
			P("\tVINSERTI32X4    $%d, %s, Z%d, Z%d", r, rowAddr(4*r+g, l.nib), g, g)
		}
		P("\tVPSRLW          $4, Z%d, Z%d", g, 4+g)
		op := "VPERMB "
		if l.plain {
			op = "VPANDD "
		}
		P("\t%s         Z29, Z%d, Z%d", op, g, g)
		P("\t%s         Z29, Z%d, Z%d", op, 4+g, 4+g)
		P("\tVPXORD          Z%d, Z%d, Z%d", 8+g, 8+g, 8+g)
		P("\tVPDPBUSD        Z30, Z%d, Z%d", g, 8+g)
		P("\tVPDPBUSD        Z28, Z%d, Z%d", 4+g, 8+g)
	}
	// Accumulator g's lane r is row 4r+g: dwords then qwords of the pairs
	// leave rows 4r..4r+3 in lane r.
	for _, p := range [][2]int{{8, 9}, {10, 11}} {
		P("\tVPUNPCKLDQ      Z%d, Z%d, Z16", p[1], p[0])
		P("\tVPUNPCKHDQ      Z%d, Z%d, Z%d", p[1], p[0], p[0])
		P("\tVPADDD          Z16, Z%d, Z%d", p[0], p[0])
	}
	P("\tVPUNPCKLQDQ     Z10, Z8, Z16")
	P("\tVPUNPCKHQDQ     Z10, Z8, Z8")
	P("\tVPADDD          Z8, Z16, Z16")
	T(l.gbias)
	T(l.gfloat)
	T(`	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
`)
	for _, r := range []string{"SI", "R8", "R9", "R10"} {
		P("\tADDQ            $%d, %s", l.bytes, r)
	}
	P("\tADDQ            $40, DI")
}
