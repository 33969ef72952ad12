package main

func genQ6K() {
	T(q6kIntro)
	expandQ6K()
	gemmK(q6kLayout, 4)
	gemmK(q6kLayout, 8)
}

// expandQ6K writes the Q6_K expander. A block is ql[128], qh[64], int8
// scales[16] and f16 d at 208: half n of the super-block takes ql[64n:],
// qh[32n:], and value l of its four 32-value sub-blocks m is
// (ql[l + 32(m&1)] >> 4(m>>1)) & 15 | ((qh[l] >> 2m) & 3) << 4.
func expandQ6K() {
	expandPrologue("Q6K", []string{"q6kMask0F", "q6kMask30", "q6kMaskFFFF"})
	P("eq6kloop:")
	// d: the high half of the last dword of bytes 194..209.
	loadT(194, 8)
	P("\tVPSRLD $16, Z11, Z11")
	P("\tVPMOVDW Z11, Y11")
	P("\tVCVTPH2PS Y11, Z11")
	P("\tVMOVUPS Z11, %d(DI)", q6kLayout.stride-64)
	// The scales, sign-extended to int32 per group, and as int16 pairs
	// (sc[2s], sc[2s+1]) for the block-sum correction.
	loadT(192, 12)
	for q := range 4 {
		for p := range 2 {
			g := 4*q + 2*p
			P("\tVPSLLD $%d, Z%d, Z4", 24-16*p, 12+q)
			P("\tVPSRAD $24, Z4, Z4")
			P("\tVMOVDQU32 Z4, %d(DI)", q6kLayout.scales+64*g)
			P("\tVPSLLD $%d, Z%d, Z5", 16-16*p, 12+q)
			P("\tVPSRAD $24, Z5, Z5")
			P("\tVMOVDQU32 Z5, %d(DI)", q6kLayout.scales+64*(g+1))
			P("\tVPANDD Z28, Z4, Z4")
			P("\tVPSLLD $16, Z5, Z5")
			P("\tVPORD Z5, Z4, Z4")
			P("\tVMOVDQU32 Z4, %d(DI)", q6kLayout.pairs+64*(2*q+p))
		}
	}
	for c := range 4 {
		n, h := c/2, c%2
		loadT(64*n+16*h, 8)
		loadT(64*n+32+16*h, 12)
		loadT(128+32*n+16*h, 16)
		for k := range 4 {
			d := 4*h + k
			for m := range 4 {
				lo := 8 + 4*(m&1) + k
				if m < 2 {
					P("\tVPANDD Z30, Z%d, Z20", lo)
				} else {
					P("\tVPSRLD $4, Z%d, Z20", lo)
					P("\tVPANDD Z30, Z20, Z20")
				}
				switch s := 4 - 2*m; {
				case s > 0:
					P("\tVPSLLD $%d, Z%d, Z21", s, 16+k)
					P("\tVPANDD Z29, Z21, Z21")
				case s < 0:
					P("\tVPSRLD $%d, Z%d, Z21", -s, 16+k)
					P("\tVPANDD Z29, Z21, Z21")
				default:
					P("\tVPANDD Z29, Z%d, Z21", 16+k)
				}
				P("\tVPORD Z21, Z20, Z20")
				P("\tVMOVDQU32 Z20, %d(DI)", 512*(4*n+m)+64*d)
			}
		}
	}
	expandEnd("eq6kloop", 210, q6kLayout.stride)
}
