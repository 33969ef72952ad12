package main

import "fmt"

// genGemmF writes gemmf_amd64.s: the float tile products gemmF32x4 (f32
// weight rows) and gemmF16x4 (f16 rows, converted as they are loaded), one
// 4x4 tile loop for both weight formats.
func genGemmF() {
	T(gemmFIntro)
	gemmF4(false)
	P("")
	gemmF4(true)
}

const gemmFIntro = `//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// Float tile products: four activation rows against four weight rows per
// pass, in 16 zmm accumulators; each output is one FMA chain over the
// 16-lane steps of k, then the masked tail step, then REDUCE4, the same
// arithmetic as gemvF32 and gemvF16 (kernels_amd64.s), so a row's result
// does not depend on the batch size or on the weights' f32 or f16 storage
// (the f16 conversion is exact).

`

// gemmF4 writes gemmF32x4 (f16 false) or gemmF16x4. AX is the byte offset
// into the weight rows; with f16 weights the activation offset is twice
// it.
func gemmF4(f16 bool) {
	name, l, wsz, xs := "gemmF32x4", "gm", 4, 1
	if f16 {
		name, l, wsz, xs = "gemmF16x4", "gh", 2, 2
	}
	if f16 {
		T(`// func gemmF16x4(x *float32, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int, pf *byte)
// gemmF32x4 with f16 weight rows (ws in bytes) converted as they are
// loaded: the conversion is exact, so every output is gemmF32x4's FMA
// chain, masked tail and REDUCE4 on the decoded rows, bit for bit, without
// a decoded f32 copy of the tile (half the cache footprint, no decode
// pass).
`)
	} else {
		T(`// func gemmF32x4(x *float32, xs int, w *float32, ws int, k int, dst *float32, ds int, nw int, pf *byte)
// dst[i*ds+r] = dot(x[i*xs:], w[r*ws:]) for i < 4, r < nw (a multiple of 4).
// Each 16-lane step also prefetches 128 bytes at pf onward (the next
// weight tile), so DRAM reads overlap the arithmetic.
`)
	}
	step := 16 * wsz // weight bytes of a 16-lane step
	P("TEXT ·%s(SB), NOSPLIT, $0-72", name)
	P("\tMOVQ k+32(FP), CX")
	P("\tMOVQ CX, BX")
	P("\tSHRQ $4, BX")
	P("\tSHLQ $%d, BX", log2(step))
	if f16 {
		P("\tMOVQ BX, R14          // R14 = f16 bytes of whole 16-lane steps; the x offset is twice it")
	} else {
		P("\tMOVQ BX, R14          // R14 = bytes of whole 16-lane steps")
	}
	T(`	TAILMASK
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), CX
	SHLQ $2, CX
	LEAQ (SI)(CX*1), R8
	LEAQ (SI)(CX*2), R9
	LEAQ (R8)(CX*2), R10
	MOVQ w+16(FP), DI
	MOVQ dst+40(FP), DX
	MOVQ nw+56(FP), BX
	MOVQ pf+64(FP), R15

`)
	P("%srow:", l)
	P("\tCMPQ BX, $4")
	P("\tJLT  %sdone", l)
	P("\tMOVQ ws+24(FP), CX")
	if !f16 {
		P("\tSHLQ $2, CX")
	}
	P("\tLEAQ (DI)(CX*1), R11")
	P("\tLEAQ (DI)(CX*2), R12")
	P("\tLEAQ (R11)(CX*2), R13")
	for i := range 16 {
		P("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	P("\tXORQ AX, AX")
	P("")
	acts := []string{"SI", "R8", "R9", "R10"}
	rows := []string{"DI", "R11", "R12", "R13"}
	fmas := func() {
		for i := range 4 {
			for r := range 4 {
				P("\tVFMADD231PS Z%d, Z%d, Z%d", 20+r, 16+i, 4*i+r)
			}
		}
	}
	P("%sloop:", l)
	P("\tCMPQ AX, R14")
	P("\tJGE  %stail", l)
	P("\tPREFETCHT0  (R15)")
	P("\tPREFETCHT0  64(R15)")
	P("\tADDQ        $128, R15")
	for i, a := range acts {
		P("\tVMOVUPS     (%s)(AX*%d), Z%d", a, xs, 16+i)
	}
	for r, w := range rows {
		if f16 {
			P("\tVCVTPH2PS   (%s)(AX*1), Z%d", w, 20+r)
		} else {
			P("\tVMOVUPS     (%s)(AX*1), Z%d", w, 20+r)
		}
	}
	fmas()
	P("\tADDQ        $%d, AX", step)
	P("\tJMP         %sloop", l)
	P("")
	P("%stail:", l)
	P("\tKORTESTW K1, K1")
	P("\tJZ       %sreduce", l)
	for i, a := range acts {
		P("\tVMOVUPS.Z   (%s)(AX*%d), K1, Z%d", a, xs, 16+i)
	}
	for r, w := range rows {
		if f16 {
			P("\tVMOVDQU16.Z (%s)(AX*1), K1, Y%d", w, 20+r)
			P("\tVCVTPH2PS   Y%d, Z%d", 20+r, 20+r)
		} else {
			P("\tVMOVUPS.Z   (%s)(AX*1), K1, Z%d", w, 20+r)
		}
	}
	fmas()
	P("")
	P("%sreduce:", l)
	P("\tMOVQ ds+48(FP), CX")
	P("\tSHLQ $2, CX")
	for i := range 4 {
		a := 4 * i
		P("\tREDUCE4(Z%d, Z%d, Z%d, Z%d, Y%d, Y%d, Y%d, Y%d, X%d, X%d, X%d, X%d)",
			a, a+1, a+2, a+3, a, a+1, a+2, a+3, a, a+1, a+2, a+3)
		P("\tVMOVUPS X%d, %s", a, []string{"(DX)", "(DX)(CX*1)", "(DX)(CX*2)", "(AX)(CX*1)"}[i])
		if i == 2 {
			P("\tLEAQ    (DX)(CX*2), AX")
		}
	}
	P("\tADDQ    $16, DX")
	P("\tMOVQ    ws+24(FP), CX")
	// Four weight rows on: gemmF32x4's ws counts float32s, gemmF16x4's
	// bytes.
	if f16 {
		P("\tSHLQ    $2, CX")
	} else {
		P("\tSHLQ    $4, CX")
	}
	P("\tADDQ    CX, DI")
	P("\tSUBQ    $4, BX")
	P("\tJMP     %srow", l)
	P("")
	P("%sdone:", l)
	P("\tVZEROUPPER")
	P("\tRET")
}

func log2(n int) int {
	for i := 0; ; i++ {
		if 1<<i == n {
			return i
		}
		if 1<<i > n {
			panic(fmt.Sprintf("log2: %d is not a power of two", n))
		}
	}
}
