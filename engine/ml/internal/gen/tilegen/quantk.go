package main

// genQuantK writes quantActQ8KAVX512. Per 256-value block: the amax over
// 16 vectors (two alternating accumulators), then sixteen identical steps,
// one per 16 values: scale, round, clamp, store bytes, and the sum of the
// stored (sign-extended) bytes as the int16 block sum.
func genQuantK() {
	T(quantKIntro)
	for v := range 16 {
		P("\tVPANDD %d(SI), Z31, Z2", 64*v)
		P("\tVMAXPS Z%d, Z2, Z%d", v%2, v%2)
	}
	T(quantKFind)
	for v := range 16 {
		P("\tVMULPS %d(SI), Z3, Z4", 64*v)
		P("\tVCVTPS2DQ Z4, Z4")
		P("\tVPMINSD Z30, Z4, Z4")
		P("\tVPMOVDB Z4, %d(DI)", 16*v)
		P("\tVPSLLD $24, Z4, Z4")
		P("\tVPSRAD $24, Z4, Z4")
		P("\tVEXTRACTI64X4 $1, Z4, Y5")
		P("\tVPADDD Y5, Y4, Y4")
		P("\tVEXTRACTI128 $1, Y4, X5")
		P("\tVPADDD X5, X4, X4")
		P("\tVPSHUFD $0x4e, X4, X5")
		P("\tVPADDD X5, X4, X4")
		P("\tVPSHUFD $0xb1, X4, X5")
		P("\tVPADDD X5, X4, X4")
		P("\tVMOVD X4, AX")
		P("\tMOVW AX, %d(DI)", q8KBsums+2*v)
	}
	T(quantKEnd)
}
