// Hand-written: the one-row-at-a-time F16 matvec.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// One full 16-lane step at byte offset off of the row: convert the weights
// and accumulate against x (the x offset is twice the f16 offset).
#define F16R1STEP(off, t) \
	VCVTPH2PS   off(DI)(AX*1), t \
	VFMADD231PS (off*2)(SI)(AX*2), t, Z0

// func gemvF16x1(x *float32, w *byte, ws int, k int, dst *float32, nw int)
// gemvF16 one row at a time (any nw): per output the same FMA chain over
// k, masked tail and reduction, so results equal gemvF16's and
// gemvF16x8's bit for bit. It reads the rows in address order, one
// stream, which measured 7-15% faster a core than the eight-row kernel's
// eight streams a row apart (with the usual row sizes, multiples of 4 KB,
// those share L1 sets: the likely cause, not verified); one chain per row caps a core at one FMA per FMA
// latency, above what a core streams from DRAM. Two lines a step are
// prefetched f16PfBytes ahead (across rows: they are contiguous or
// padded, and a prefetch past the end does not fault).
TEXT ·gemvF16x1(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $5, R9          // R9 = bytes of f16 in whole 16-lane steps
	MOVQ R9, R10
	ANDQ $-128, R10      // R10 = bytes in whole groups of four steps
	TAILMASK
	MOVQ dst+32(FP), DX
	MOVQ nw+40(FP), R11
	MOVQ ·f16PfBytes(SB), R12

r1row:
	TESTQ R11, R11
	JZ    r1done
	LEAQ  (DI)(R12*1), R13 // prefetched: f16PfBytes on
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX        // f16 byte offset; the x offset is twice it

r1loop4:
	CMPQ AX, R10
	JGE  r1loop1
	PREFETCHT1 (R13)(AX*1)
	PREFETCHT1 64(R13)(AX*1)
	F16R1STEP(0, Z4)
	F16R1STEP(32, Z5)
	F16R1STEP(64, Z6)
	F16R1STEP(96, Z7)
	ADDQ $128, AX
	JMP  r1loop4

r1loop1:
	CMPQ AX, R9
	JGE  r1tail
	F16R1STEP(0, Z4)
	ADDQ $32, AX
	JMP  r1loop1

r1tail:
	KORTESTW K1, K1
	JZ       r1reduce
	VMOVUPS.Z   (SI)(AX*2), K1, Z8
	VMOVDQU16.Z (DI)(AX*1), K1, Y9
	VCVTPH2PS   Y9, Z9
	VFMADD231PS Z9, Z8, Z0

r1reduce:
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	ADDQ   R8, DI
	DECQ   R11
	JMP    r1row

r1done:
	VZEROUPPER
	RET
