package main

// The pieces of the 16-row VNNI matvec family (gemv16), shared by
// gemvQ8VNNI (q8gemv.go), the Q4_0, IQ4_NL, Q5_0 and MXFP4 matvecs
// (expand.go) and G41_FINISH of the Q4_1/Q5_1 ones (q41.go).

import "fmt"

// printf writes one line of assembly (P, or P continuing a macro).
type printf func(format string, args ...any)

// rowIdx is the index suffix of row r%4 of a group of four rows at stride CX
// (DX = 3*CX).
var rowIdx = [4]string{"", "(CX*1)", "(CX*2)", "(DX*1)"}

// rowAddr is the address of byte off of the current block of row r of a
// 16-row tile whose rows 0, 4, 8 and 12 are at SI, R8, R9 and R10 (stride
// CX, DX = 3*CX).
func rowAddr(r, off int) string {
	base := []string{"SI", "R8", "R9", "R10"}[r/4]
	return fmt.Sprintf("%d(%s)%s", off, base, rowIdx[r%4])
}

// gemv16Scales gathers the f16 scales at byte 0 of the 16 rows' current
// blocks into the words of Y26 in row order, by integer loads and shifts
// (a VPGATHERDD costs more than the rest of a block step): four rows to a
// GPR (AX, with R15), then into X26 and X25. The gemv16 kernels of every
// 32-value block layout (Q8_0, Q4_0, IQ4_NL, Q5_0) start a block this way.
func gemv16Scales(P printf) {
	for g := range 4 {
		P("\tMOVWQZX         %s, AX", rowAddr(4*g, 0))
		for r := 1; r < 4; r++ {
			P("\tMOVWQZX         %s, R15", rowAddr(4*g+r, 0))
			P("\tSHLQ            $%d, R15", 16*r)
			P("\tORQ             R15, AX")
		}
		switch g {
		case 0:
			P("\tVMOVQ           AX, X26")
		case 1:
			P("\tVPINSRQ         $1, AX, X26, X26")
		case 2:
			P("\tVMOVQ           AX, X25")
		case 3:
			P("\tVPINSRQ         $1, AX, X25, X25")
			P("\tVINSERTI32X4    $1, X25, Y26, Y26")
		}
	}
}

// gemv16Reduce reduces the eight VNNI accumulators Z8..Z15 (accumulator k
// holding rows k and k+4, or k+4 and k+8 for k >= 4, eight partial sums
// each) to one int32 per row in the lanes of Z16, in row order: pairs of
// accumulators, dwords then qwords, then 128-bit lanes. Uses Z17.
func gemv16Reduce(P printf) {
	for _, p := range [][2]int{{8, 9}, {10, 11}, {12, 13}, {14, 15}} {
		P("\tVPUNPCKLDQ      Z%d, Z%d, Z16", p[1], p[0])
		P("\tVPUNPCKHDQ      Z%d, Z%d, Z%d", p[1], p[0], p[0])
		P("\tVPADDD          Z16, Z%d, Z%d", p[0], p[0])
	}
	for _, p := range [][2]int{{8, 10}, {12, 14}} {
		P("\tVPUNPCKLQDQ     Z%d, Z%d, Z16", p[1], p[0])
		P("\tVPUNPCKHQDQ     Z%d, Z%d, Z%d", p[1], p[0], p[0])
		P("\tVPADDD          Z16, Z%d, Z%d", p[0], p[0])
	}
	P("\tVSHUFI32X4      $0x88, Z12, Z8, Z16")
	P("\tVSHUFI32X4      $0xdd, Z12, Z8, Z17")
	P("\tVPADDD          Z17, Z16, Z16")
}

// gemv16Pair is the two rows of accumulator k (see gemv16Reduce).
func gemv16Pair(k int) (lo, hi int) {
	if k >= 4 {
		return k + 4, k + 8
	}
	return k, k + 4
}

// gemv16ScaleBytes gathers the one-byte scales at byte 0 of the 16 rows'
// current blocks into the dwords of Z26 in row order (MXFP4's E8M0
// exponents): eight rows to a GPR (AX, with R15), then zero-extended.
func gemv16ScaleBytes(P printf) {
	for g := range 2 {
		for r := range 8 {
			if r == 0 {
				P("\tMOVBQZX         %s, AX", rowAddr(8*g, 0))
				continue
			}
			P("\tMOVBQZX         %s, R15", rowAddr(8*g+r, 0))
			P("\tSHLQ            $%d, R15", 8*r)
			P("\tORQ             R15, AX")
		}
		if g == 0 {
			P("\tVMOVQ           AX, X26")
		} else {
			P("\tVPINSRQ         $1, AX, X26, X26")
		}
	}
	P("\tVPMOVZXBD       X26, Z26")
}
