package main

import (
	"fmt"
)

// gemvVNNI writes gemvQ8VNNI, the n=1 product straight from the Q8_0
// rows: no packed tile, so no stores and reloads. Each zmm holds the
// 32 weights of two rows (+128, unsigned) against the activations in both
// halves; VPDPBUSD leaves 8 partial sums per row, which a transpose-add
// tree reduces to one int32 per row, lanes in row order.
func gemvVNNI() {
	P(`// func gemvQ8VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)
// dst[r] = the Q8 product of the quantized activation row x and row r of
// the 16 Q8_0 rows at w (stride rb bytes, nb blocks), for the rows r set in
// mask: the same int32 block sums and f32 steps as gemmQ8x1 on the packed
// tile. Accumulator k holds rows k and k+4 (k < 4), or k+4 and k+8, so the
// reduction tree ends with the rows in lane order. The same blocks pfd
// bytes further on (a later tile) are prefetched into the L2 cache when
// pfd is not 0: a tile is 16 rows (35 KB at 2048 columns), and
// PREFETCHT0 that far ahead thrashed the 32 KB L1 (1.33x fewer bytes per
// CPU-second on the 1B Q8_0 decode stream, BenchmarkDecodeStream).
TEXT ·gemvQ8VNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
	VPBROADCASTD CX, Z28
	VPMULLD      q8iota<>(SB), Z28, Z28
	VPBROADCASTD q8bias<>(SB), Z27
	VPXORD       Z31, Z31, Z31
	TESTQ        R11, R11
	JZ           gvloop
	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11
	JMP          gvpf

gvloop:`)
	gemvVNNIBody("gvloop", false)
	P(`	JMP gvdone

gvpf:`)
	gemvVNNIBody("gvpf", true)
	P(`
gvdone:
	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET
`)
}

func gemvVNNIBody(label string, prefetch bool) {
	gemv16Scales(P)
	P("\tVBROADCASTI64X4 8(DI), Z30")
	for k := 0; k < 8; k++ {
		lo, hi := gemv16Pair(k)
		P("\tVMOVDQU         %s, Y%d", rowAddr(lo, 2), k)
		P("\tVINSERTI64X4    $1, %s, Z%d, Z%d", rowAddr(hi, 2), k, k)
		P("\tVPXORD          Z27, Z%d, Z%d", k, k)
		P("\tVPXORD          Z%d, Z%d, Z%d", 8+k, 8+k, 8+k)
		P("\tVPDPBUSD        Z30, Z%d, Z%d", k, 8+k)
		if prefetch {
			P("\tPREFETCHT1      %s", pfAddr(lo))
			P("\tPREFETCHT1      %s", pfAddr(hi))
		}
	}
	gemv16Reduce(P)
	P(`	VPADDD.BCST     4(DI), Z16, Z16
	VCVTPH2PS       Y26, Z26
	VMULPS.BCST     (DI), Z26, Z26
	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
	ADDQ            $34, SI
	ADDQ            $34, R8
	ADDQ            $34, R9
	ADDQ            $34, R10
	ADDQ            $40, DI`)
	if prefetch {
		P(`	ADDQ            $34, R11
	ADDQ            $34, R12
	ADDQ            $34, R13
	ADDQ            $34, R14`)
	}
	P(`	DECQ            BX
	JNZ             ` + label)
}

// pfAddr is the address of row r of the tile pfd bytes on (R11..R14 are
// SI, R8, R9 and R10 plus pfd).
func pfAddr(r int) string {
	base := []string{"R11", "R12", "R13", "R14"}[r/4]
	return fmt.Sprintf("(%s)%s", base, idx[r%4])
}

// gemvAVX2 writes gemvQ8AVX2: the n=1 product of 8 Q8_0 rows for CPUs
// without AVX-512 VNNI. Weights and activations are sign-extended to int16
// and multiplied with VPMADDWD, exact for any int8 values (VPMADDUBSW
// would saturate), so the block sums are the same int32s as everywhere.
func gemvAVX2() {
	P(`// func gemvQ8AVX2(w *byte, rb int, nb int, x *byte, dst *float32)
// dst[r] = the Q8 product of the quantized activation row x and row r of
// the 8 Q8_0 rows at w (stride rb bytes, nb blocks), for r < 8: the same
// int32 block sums and f32 steps as the other Q8 kernels.
TEXT ·gemvQ8AVX2(SB), NOSPLIT, $0-40
	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	VXORPS       Y14, Y14, Y14

g2loop:
	VPMOVSXBW    8(DI), Y12
	VPMOVSXBW    24(DI), Y10`)
	// The 8 rows' f16 scales, four to a GPR, then into the words of X11.
	for g := 0; g < 2; g++ {
		P("\tMOVWQZX      %s, AX", rowAddr(4*g, 0))
		for r := 1; r < 4; r++ {
			P("\tMOVWQZX      %s, R9", rowAddr(4*g+r, 0))
			P("\tSHLQ         $%d, R9", 16*r)
			P("\tORQ          R9, AX")
		}
		if g == 0 {
			P("\tVMOVQ        AX, X11")
		} else {
			P("\tVPINSRQ      $1, AX, X11, X11")
		}
	}
	for k := 0; k < 8; k++ {
		P("\tVPMOVSXBW    %s, Y8", rowAddr(k, 2))
		P("\tVPMOVSXBW    %s, Y9", rowAddr(k, 18))
		P("\tVPMADDWD     Y12, Y8, Y8")
		P("\tVPMADDWD     Y10, Y9, Y9")
		P("\tVPADDD       Y9, Y8, Y%d", k)
	}
	P(`	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y3, Y2, Y2
	VPHADDD      Y5, Y4, Y4
	VPHADDD      Y7, Y6, Y6
	VPHADDD      Y2, Y0, Y0
	VPHADDD      Y6, Y4, Y4
	VPERM2I128   $0x20, Y4, Y0, Y1
	VPERM2I128   $0x31, Y4, Y0, Y2
	VPADDD       Y2, Y1, Y0
	VCVTPH2PS    X11, Y11
	VBROADCASTSS (DI), Y9
	VMULPS       Y9, Y11, Y11
	VCVTDQ2PS    Y0, Y0
	VMULPS       Y11, Y0, Y0
	VADDPS       Y0, Y14, Y14
	ADDQ         $34, SI
	ADDQ         $34, R8
	ADDQ         $40, DI
	DECQ         BX
	JNZ          g2loop
	MOVQ         dst+32(FP), AX
	VMOVUPS      Y14, (AX)
	VZEROUPPER
	RET
`)
}
