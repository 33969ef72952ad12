// Hand-written: two broadcast-FMA tile loops driven by macros, short enough to read.

//go:build amd64 && !purego

#include "textflag.h"

// One row's step: broadcast a[row][j] and add its products with the 32
// packed values of step j (Z24, Z25) to the row's two accumulators.
#define ROW(src, b, acc0, acc1) \
	VBROADCASTSS src, b         \
	VFMADD231PS  Z24, b, acc0   \
	VFMADD231PS  Z25, b, acc1

// func gemmBcast12x32(a *float32, as int, p *float32, k int, dst *float32, ds int)
// dst[i*ds+c] = sum over j < k of a[i*as+j] * p[j*32+c], for i < 12 and
// c < 32: a holds 12 rows (MatMulBatch's weight rows), p a packed panel
// (step j's 32 values contiguous: 32 activation rows, k-major). Each
// output is one FMA chain over j in order (no lanes to reduce), so its
// value does not depend on the other rows or columns of the tile.
TEXT ·gemmBcast12x32(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ as+8(FP), R9
	SHLQ $2, R9                // row stride in bytes
	LEAQ (R9)(R9*2), AX
	LEAQ (SI)(AX*1), R10       // row 3
	LEAQ (R10)(AX*1), R11      // row 6
	LEAQ (R11)(AX*1), R12      // row 9
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

loop:
	VMOVUPS (DI), Z24
	VMOVUPS 64(DI), Z25
	ROW((SI), Z26, Z0, Z1)
	ROW((SI)(R9*1), Z27, Z2, Z3)
	ROW((SI)(R9*2), Z28, Z4, Z5)
	ROW((R10), Z29, Z6, Z7)
	ROW((SI)(R9*4), Z30, Z8, Z9)
	ROW((R10)(R9*2), Z31, Z10, Z11)
	ROW((R11), Z26, Z12, Z13)
	ROW((R10)(R9*4), Z27, Z14, Z15)
	ROW((SI)(R9*8), Z28, Z16, Z17)
	ROW((R12), Z29, Z18, Z19)
	ROW((R11)(R9*4), Z30, Z20, Z21)
	ROW((R10)(R9*8), Z31, Z22, Z23)
	ADDQ $4, SI
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $128, DI
	DECQ CX
	JNZ  loop

	MOVQ dst+32(FP), DX
	MOVQ ds+40(FP), R9
	SHLQ $2, R9
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z8, (DX)
	VMOVUPS Z9, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z10, (DX)
	VMOVUPS Z11, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z12, (DX)
	VMOVUPS Z13, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z14, (DX)
	VMOVUPS Z15, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z16, (DX)
	VMOVUPS Z17, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z18, (DX)
	VMOVUPS Z19, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z20, (DX)
	VMOVUPS Z21, 64(DX)
	ADDQ    R9, DX
	VMOVUPS Z22, (DX)
	VMOVUPS Z23, 64(DX)
	VZEROUPPER
	RET

// One row's step of gemmBcast12x16: one accumulator.
#define ROW1(src, b, acc) \
	VBROADCASTSS src, b         \
	VFMADD231PS  Z24, b, acc

// func gemmBcast12x16(a *float32, as int, p *float32, k int, dst *float32, ds int)
// gemmBcast12x32 for a panel of 16 values per step (p's stride 16): the
// same FMA chain per output, so the two kernels agree bit for bit.
TEXT ·gemmBcast12x16(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ as+8(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), AX
	LEAQ (SI)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	LEAQ (R11)(AX*1), R12
	MOVQ p+16(FP), DI
	MOVQ k+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z2, Z2, Z2
	VPXORD Z4, Z4, Z4
	VPXORD Z6, Z6, Z6
	VPXORD Z8, Z8, Z8
	VPXORD Z10, Z10, Z10
	VPXORD Z12, Z12, Z12
	VPXORD Z14, Z14, Z14
	VPXORD Z16, Z16, Z16
	VPXORD Z18, Z18, Z18
	VPXORD Z20, Z20, Z20
	VPXORD Z22, Z22, Z22

loop16:
	VMOVUPS (DI), Z24
	ROW1((SI), Z26, Z0)
	ROW1((SI)(R9*1), Z27, Z2)
	ROW1((SI)(R9*2), Z28, Z4)
	ROW1((R10), Z29, Z6)
	ROW1((SI)(R9*4), Z30, Z8)
	ROW1((R10)(R9*2), Z31, Z10)
	ROW1((R11), Z26, Z12)
	ROW1((R10)(R9*4), Z27, Z14)
	ROW1((SI)(R9*8), Z28, Z16)
	ROW1((R12), Z29, Z18)
	ROW1((R11)(R9*4), Z30, Z20)
	ROW1((R10)(R9*8), Z31, Z22)
	ADDQ $4, SI
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $64, DI
	DECQ CX
	JNZ  loop16

	MOVQ dst+32(FP), DX
	MOVQ ds+40(FP), R9
	SHLQ $2, R9
	VMOVUPS Z0, (DX)
	ADDQ    R9, DX
	VMOVUPS Z2, (DX)
	ADDQ    R9, DX
	VMOVUPS Z4, (DX)
	ADDQ    R9, DX
	VMOVUPS Z6, (DX)
	ADDQ    R9, DX
	VMOVUPS Z8, (DX)
	ADDQ    R9, DX
	VMOVUPS Z10, (DX)
	ADDQ    R9, DX
	VMOVUPS Z12, (DX)
	ADDQ    R9, DX
	VMOVUPS Z14, (DX)
	ADDQ    R9, DX
	VMOVUPS Z16, (DX)
	ADDQ    R9, DX
	VMOVUPS Z18, (DX)
	ADDQ    R9, DX
	VMOVUPS Z20, (DX)
	ADDQ    R9, DX
	VMOVUPS Z22, (DX)
	VZEROUPPER
	RET
