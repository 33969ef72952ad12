package main

// The K-quant tile expanders: 16 weight rows rb bytes apart, read 16 bytes
// at a time and transposed so that each vector holds one dword of every
// row, then split into the layout the tile GEMMs read.

// expandPrologue loads the arguments and row pointers (SI, +rb, +2rb, R10 =
// 3rb; R11, R12, R13 the next groups of four rows) and broadcasts masks[i]
// into Z30-i.
func expandPrologue(name string, masks []string) {
	P("TEXT ·expand%s(SB), NOSPLIT, $0-32", name)
	P("\tMOVQ    dst+0(FP), DI")
	P("\tMOVQ    w+8(FP), SI")
	P("\tMOVQ    rb+16(FP), R9")
	P("\tMOVQ    nb+24(FP), BX")
	P("\tLEAQ    (R9)(R9*2), R10")
	P("\tLEAQ    (SI)(R9*4), R11")
	P("\tLEAQ    (R11)(R9*4), R12")
	P("\tLEAQ    (R12)(R9*4), R13")
	for i, m := range masks {
		P("\tVPBROADCASTD %s<>(SB), Z%d", m, 30-i)
	}
	P("")
}

// loadT loads bytes off..off+15 of the 16 rows and transposes them into
// Z(to)..Z(to+3): Z(to+k) holds dword k of rows 0..15 in its lanes (row
// 4q+r in lane 4q+r: 128-bit lane q from the q-th group of four rows).
func loadT(off, to int) {
	idx := [4]string{"", "(R9*1)", "(R9*2)", "(R10*1)"}
	for r := range 4 {
		P("\tVMOVDQU %d(SI)%s, X%d", off, idx[r], r)
		for q, base := range []string{"R11", "R12", "R13"} {
			P("\tVINSERTI32X4 $%d, %d(%s)%s, Z%d, Z%d", q+1, off, base, idx[r], r, r)
		}
	}
	P("\tVPUNPCKLDQ Z1, Z0, Z4")
	P("\tVPUNPCKHDQ Z1, Z0, Z5")
	P("\tVPUNPCKLDQ Z3, Z2, Z6")
	P("\tVPUNPCKHDQ Z3, Z2, Z7")
	P("\tVPUNPCKLQDQ Z6, Z4, Z%d", to)
	P("\tVPUNPCKHQDQ Z6, Z4, Z%d", to+1)
	P("\tVPUNPCKLQDQ Z7, Z5, Z%d", to+2)
	P("\tVPUNPCKHQDQ Z7, Z5, Z%d", to+3)
}

// expandEnd advances the four row pointers by the block size and the tile
// by its expanded size, and closes the loop.
func expandEnd(label string, block, stride int) {
	for _, r := range []string{"SI", "R11", "R12", "R13"} {
		P("\tADDQ $%d, %s", block, r)
	}
	P("\tADDQ $%d, DI", stride)
	P("\tDECQ BX")
	P("\tJNZ  %s", label)
	P("\tVZEROUPPER")
	P("\tRET")
}

// q4kHeader expands the first 16 bytes of a Q4_K/Q5_K block: f16 d and
// dmin into f32 at 5120 and 5184, and the 12 packed 6-bit scales and mins
// (get_scale_min_k4) into int32 scales at 4096 and (m, m) int16 pairs at
// 4608, 64 bytes per sub-block.
func q4kHeader() {
	loadT(0, 8)
	P("\tVPMOVDW Z8, Y4")
	P("\tVCVTPH2PS Y4, Z4")
	P("\tVMOVUPS Z4, 5120(DI)")
	P("\tVPSRLD $16, Z8, Z5")
	P("\tVPMOVDW Z5, Y5")
	P("\tVCVTPH2PS Y5, Z5")
	P("\tVMOVUPS Z5, 5184(DI)")
	pair := func(s int) {
		P("\tVMOVDQU32 Z4, %d(DI)", 4096+64*s)
		P("\tVPSLLD $16, Z5, Z6")
		P("\tVPORD Z6, Z5, Z5")
		P("\tVMOVDQU32 Z5, %d(DI)", 4608+64*s)
	}
	// Sub-blocks 0..3: the low 6 bits of bytes s (scale) and s+4 (min).
	for s := range 4 {
		P("\tVPSRLD $%d, Z9, Z4", 8*s)
		P("\tVPANDD Z29, Z4, Z4")
		P("\tVPSRLD $%d, Z10, Z5", 8*s)
		P("\tVPANDD Z29, Z5, Z5")
		pair(s)
	}
	// Sub-blocks 4..7: a nibble of byte s+4 and the top two bits of
	// bytes s-4 (scale) and s (min).
	for s := range 4 {
		P("\tVPSRLD $%d, Z11, Z4", 8*s)
		P("\tVPANDD Z27, Z4, Z4")
		P("\tVPSRLD $%d, Z9, Z6", 8*s+2)
		P("\tVPANDD Z28, Z6, Z6")
		P("\tVPORD Z6, Z4, Z4")
		P("\tVPSRLD $%d, Z11, Z5", 8*s+4)
		P("\tVPANDD Z27, Z5, Z5")
		P("\tVPSRLD $%d, Z10, Z6", 8*s+2)
		P("\tVPANDD Z28, Z6, Z6")
		P("\tVPORD Z6, Z5, Z5")
		pair(4 + s)
	}
}

// expandQ4KLike writes expandQ4K (hbits false) or expandQ5K (hbits true).
// The 128 bytes of qs are four groups of 32: group j holds sub-block 2j in
// its low nibbles and 2j+1 in its high ones; Q5_K's fifth bit of value l
// of sub-block s is bit s of qh[l].
func expandQ4KLike(name, label string, hbits bool) {
	expandPrologue(name, []string{"q4kMask0F", "q4kMask3F", "q4kMask30", "q4kMask0F1", "q4kMask10"})
	P("%s:", label)
	q4kHeader()
	qs, block := 16, 144
	if hbits {
		loadT(16, 12)
		loadT(32, 16)
		qs, block = 48, 176
	}
	shift := func(n, src int) {
		if n >= 0 {
			P("\tVPSLLD $%d, Z%d, Z21", n, src)
		} else {
			P("\tVPSRLD $%d, Z%d, Z21", -n, src)
		}
	}
	for c := range 8 {
		loadT(qs+16*c, 8)
		j, h := c/2, c%2
		for k := range 4 {
			v, d := 8+k, 4*h+k
			lo, hi := 512*2*j+64*d, 512*(2*j+1)+64*d
			P("\tVPANDD Z30, Z%d, Z20", v)
			if hbits {
				shift(4-2*j, 12+4*h+k)
				P("\tVPTERNLOGD $0xf8, Z26, Z21, Z20")
			}
			P("\tVMOVDQU32 Z20, %d(DI)", lo)
			P("\tVPSRLD $4, Z%d, Z%d", v, v)
			P("\tVPANDD Z30, Z%d, Z%d", v, v)
			if hbits {
				shift(3-2*j, 12+4*h+k)
				P("\tVPTERNLOGD $0xf8, Z26, Z21, Z%d", v)
			}
			P("\tVMOVDQU32 Z%d, %d(DI)", v, hi)
		}
	}
	expandEnd(label, block, q4kLayout.stride)
}
