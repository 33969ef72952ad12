package main

import "fmt"

// genFloatMM writes floatmm_amd64.s: the float products whose f32 and
// f16 weight forms are the same loop: the AVX-512 4x4 tile products
// gemmF32x4 and gemmF16x4, and the AVX2 four-row matvecs gemvF32AVX2 and
// gemvF16AVX2. The f16 forms convert the rows as they are loaded (exact),
// so each gives the bits of its f32 form on the decoded rows. (BF16
// products have their own arithmetic, llama.cpp's: bf16dot_amd64.s.)
func genFloatMM() {
	T(floatMMIntro)
	gemmF4(wF32)
	P("")
	gemmF4(wF16)
	P("")
	gemvF4AVX2(false)
	P("")
	gemvF4AVX2(true)
}

const floatMMIntro = `//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// Float products with f32 or f16 weight rows, one loop for both.
// The tile products take four activation rows against four weight rows per
// pass, in 16 zmm accumulators; each output is one FMA chain over the
// 16-lane steps of k, then the masked tail step, then REDUCE4, the same
// arithmetic as gemvF32 and gemvF16 (kernels_amd64.s), so a row's result
// does not depend on the batch size or on the weights' f32 or f16 storage
// (the conversion is exact). The AVX2 matvecs reduce as gemmF32x4AVX2
// (kernels_avx2_amd64.s) does.

`

// The weight row formats of the float kernels.
const (
	wF32 = iota
	wF16
)

// widen16 writes the conversion of the 16 f16 weights at src (a memory
// operand or a ymm register) to f32 in zmm register z (exact).
func widen16(kind int, src string, z int) {
	P("\tVCVTPH2PS   %s, Z%d", src, z)
}

// gemmF4 writes gemmF32x4 or gemmF16x4 (kind wF32, wF16). AX is the byte offset into the weight rows; with half-width
// weights the activation offset is twice it.
func gemmF4(kind int) {
	f16 := kind != wF32 // half-width weight rows
	name, l, wsz, xs := "gemmF32x4", "gm", 4, 1
	switch kind {
	case wF16:
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
		P("\tMOVQ BX, R14          // R14 = %s bytes of whole 16-lane steps; the x offset is twice it", "f16")
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
			widen16(kind, fmt.Sprintf("(%s)(AX*1)", w), 20+r)
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
			widen16(kind, fmt.Sprintf("Y%d", 20+r), 20+r)
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
	// Four weight rows on: gemmF32x4's ws counts float32s, the
	// half-width forms' bytes.
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

// gemvF4AVX2 writes gemvF32AVX2 (f16 false) or gemvF16AVX2: four weight
// rows per pass against one activation row, k8 values (a multiple of 8).
// AX is the byte offset into the weight rows; with f16 weights the
// activation offset is twice it.
func gemvF4AVX2(f16 bool) {
	name, l, xs := "gemvF32AVX2", "g2", 1
	if f16 {
		name, l, xs = "gemvF16AVX2", "a16", 2
	}
	if f16 {
		T(`// func gemvF16AVX2(x *float32, w *byte, ws int, k8 int, dst *float32, nw int)
// gemvF32AVX2 over f16 rows (ws bytes apart), converted in registers
// (F16C VCVTPH2PS): per output the same FMA chain over the k8 values and
// the same reduction, so results equal gemmF32x4AVX2's on the decoded rows.
// nw is a multiple of 4, k8 of 8.
`)
	} else {
		T(`// func gemvF32AVX2(x *float32, w *float32, ws int, k8 int, dst *float32, nw int)
// dst[r] = dot(x[:k8], w[r*ws:][:k8]) for r < nw, nw a multiple of 4.
`)
	}
	P("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	P("\tMOVQ x+0(FP), SI")
	P("\tMOVQ w+8(FP), DI")
	P("\tMOVQ ws+16(FP), R8")
	if !f16 {
		P("\tSHLQ $2, R8")
	}
	P("\tMOVQ k8+24(FP), R9")
	if f16 {
		P("\tSHLQ $1, R9          // bytes of f16; the x offset is twice the f16 one")
	} else {
		P("\tSHLQ $2, R9")
	}
	T(`	MOVQ dst+32(FP), DX
	MOVQ nw+40(FP), R10
	LEAQ (R8)(R8*2), R14

`)
	P("%srow:", l)
	P("\tCMPQ R10, $4")
	P("\tJLT  %sdone", l)
	T(`	MOVQ DI, R11
	LEAQ (DI)(R8*1), R12
	LEAQ (DI)(R8*2), R13
	ADDQ DI, R14
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX

`)
	P("%sloop:", l)
	P("\tCMPQ        AX, R9")
	P("\tJGE         %sred", l)
	P("\tVMOVUPS     (SI)(AX*%d), Y8", xs)
	for r, w := range []string{"R11", "R12", "R13", "R14"} {
		if f16 {
			P("\tVCVTPH2PS   (%s)(AX*1), Y%d", w, 9+r)
			P("\tVFMADD231PS Y%d, Y8, Y%d", 9+r, r)
		} else {
			P("\tVFMADD231PS (%s)(AX*1), Y8, Y%d", w, r)
		}
	}
	P("\tADDQ        $%d, AX", 32/xs)
	P("\tJMP         %sloop", l)
	P("")
	P("%sred:", l)
	T(`	// The same reduction as gemmF32x4AVX2's (pairs within each 128-bit
	// half, then the halves), so n=1 and n>1 agree bitwise.
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VMOVUPS      X0, (DX)
	ADDQ         $16, DX
	LEAQ         (DI)(R8*4), DI
	LEAQ         (R8)(R8*2), R14
	SUBQ         $4, R10
`)
	P("\tJMP          %srow", l)
	P("")
	P("%sdone:", l)
	P("\tVZEROUPPER")
	P("\tRET")
}
