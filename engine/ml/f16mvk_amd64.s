// Hand-written: the K-blocked four-row F16 matvec needs AVX-512 (VCVTPH2PS, masked FMA) that Go does not emit.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// One 16-lane step at byte offset off of the four rows: x into Z8 once,
// then each row's convert and FMA into its own accumulator.
#define F16Q4STEP(off) \
	VMOVUPS     (off*2)(AX), Z8 \
	VCVTPH2PS   off(DI), Z9 \
	VFMADD231PS Z9, Z8, Z0 \
	VCVTPH2PS   off(R11), Z10 \
	VFMADD231PS Z10, Z8, Z1 \
	VCVTPH2PS   off(R13), Z11 \
	VFMADD231PS Z11, Z8, Z2 \
	VCVTPH2PS   off(R15), Z12 \
	VFMADD231PS Z12, Z8, Z3

// The masked tail step of one row (K1, x in Z8).
#define F16Q4TAIL(row, acc) \
	VMOVDQU16.Z (row), K1, Y9 \
	VCVTPH2PS   Y9, Z9 \
	VFMADD231PS Z9, Z8, acc

// func gemvF16x4k(x *float32, w *byte, ws int, k int, dst *float32, nw int, kb int, pfd int, acc *float32)
// gemvF16 over a group of nw rows (nw and pfd multiples of 4) a K block at
// a time: for each block of kb bytes of f16 (a multiple of 128) the rows
// four at a time, the four rows' 16-lane accumulators parked in acc (16
// floats a row) between blocks. The block of x (2*kb bytes) stays in the
// L1 across the group, where a whole long row's x would not; four
// independent FMA chains, one a row, lift the cap of one FMA per FMA
// latency that gemvF16x1's single chain has, with each step's x loaded
// once for the four. Each output still gets one FMA chain over k in
// order, then the masked tail and the reduction (REDUCE4 adds the lanes
// in REDUCE1's order): gemvF16x1's and gemvF16x8's bits. While it reads
// a quad's block it prefetches into L2 the same offsets pfd rows on,
// while those are in the group, else the next block of the group's first
// rows, or after the last block the next group's first block: what it
// reads pfd rows later in time.
TEXT ·gemvF16x4k(SB), NOSPLIT, $32-72
	MOVQ ws+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $5, R9
	MOVQ R9, full-8(SP)  // bytes of f16 in whole 16-lane steps
	TAILMASK
	MOVQ $0, b0-16(SP)   // block start (f16 bytes)

q4block:
	MOVQ b0-16(SP), R10
	MOVQ R10, CX
	ADDQ kb+48(FP), CX
	CMPQ CX, full-8(SP)
	JLT  q4mid
	MOVQ full-8(SP), CX  // the last block: to the end of the whole steps

q4mid:
	MOVQ CX, b1-24(SP)
	MOVQ w+8(FP), R10    // R10 = the quad's row 0 at offset 0
	MOVQ acc+64(FP), DX
	MOVQ dst+32(FP), BX
	MOVQ nw+40(FP), CX
	MOVQ CX, left-32(SP)

q4quad:
	CMPQ left-32(SP), $0
	JLE  q4next
	// R12 = how far on the prefetched rows lie: pfd rows, or past the
	// group's end pfd-nw rows and one block on, or after the last block
	// pfd rows and back to the block start.
	MOVQ pfd+56(FP), CX
	MOVQ CX, R12
	IMULQ R8, R12
	CMPQ left-32(SP), CX
	JGT  q4pfset
	MOVQ b1-24(SP), CX
	CMPQ CX, full-8(SP)
	JGE  q4pflast
	MOVQ nw+40(FP), CX
	IMULQ R8, CX
	SUBQ CX, R12
	ADDQ b1-24(SP), R12
	SUBQ b0-16(SP), R12
	JMP  q4pfset

q4pflast:
	SUBQ b0-16(SP), R12

q4pfset:
	MOVQ b0-16(SP), CX
	TESTQ CX, CX
	JNZ   q4load
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	JMP    q4go

q4load:
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3

q4go:
	// Row pointers at the block start, x to match, and the ends.
	MOVQ x+0(FP), AX
	LEAQ (AX)(CX*2), AX
	LEAQ (R10)(CX*1), DI
	LEAQ (DI)(R8*1), R11
	LEAQ (DI)(R8*2), R13
	LEAQ (R13)(R8*1), R15
	MOVQ b1-24(SP), R9
	SUBQ CX, R9
	MOVQ R9, R14
	ANDQ $-128, R14
	ADDQ DI, R14         // R14 = DI at the end of the groups of four steps
	ADDQ DI, R9          // R9 = DI at the end of the block

q4loop4:
	CMPQ DI, R14
	JGE  q4loop1
	PREFETCHT1 (DI)(R12*1)
	PREFETCHT1 64(DI)(R12*1)
	PREFETCHT1 (R11)(R12*1)
	PREFETCHT1 64(R11)(R12*1)
	PREFETCHT1 (R13)(R12*1)
	PREFETCHT1 64(R13)(R12*1)
	PREFETCHT1 (R15)(R12*1)
	PREFETCHT1 64(R15)(R12*1)
	F16Q4STEP(0)
	F16Q4STEP(32)
	F16Q4STEP(64)
	F16Q4STEP(96)
	ADDQ $256, AX
	ADDQ $128, DI
	ADDQ $128, R11
	ADDQ $128, R13
	ADDQ $128, R15
	JMP  q4loop4

q4loop1:
	CMPQ DI, R9
	JGE  q4end
	F16Q4STEP(0)
	ADDQ $64, AX
	ADDQ $32, DI
	ADDQ $32, R11
	ADDQ $32, R13
	ADDQ $32, R15
	JMP  q4loop1

q4end:
	MOVQ b1-24(SP), CX
	CMPQ CX, full-8(SP)
	JGE  q4tail
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	JMP     q4quadnext

q4tail:
	KORTESTW K1, K1
	JZ       q4reduce
	VMOVUPS.Z (AX), K1, Z8
	F16Q4TAIL(DI, Z0)
	F16Q4TAIL(R11, Z1)
	F16Q4TAIL(R13, Z2)
	F16Q4TAIL(R15, Z3)

q4reduce:
	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3)
	VMOVUPS X0, (BX)

q4quadnext:
	ADDQ $16, BX
	ADDQ $256, DX
	LEAQ (R10)(R8*4), R10
	SUBQ $4, left-32(SP)
	JMP  q4quad

q4next:
	MOVQ b1-24(SP), CX
	CMPQ CX, full-8(SP)
	JGE  q4done
	MOVQ CX, b0-16(SP)
	JMP  q4block

q4done:
	VZEROUPPER
	RET
