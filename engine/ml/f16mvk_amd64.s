// Hand-written: the K-blocked one-row F16 matvec for rows whose x outgrows the L1.

//go:build amd64 && !purego

#include "textflag.h"
#include "reduce_amd64.h"

// One full 16-lane step at byte offset off of the row (as F16R1STEP in
// f16mv1_amd64.s).
#define F16KSTEP(off, t) \
	VCVTPH2PS   off(DI)(AX*1), t \
	VFMADD231PS (off*2)(SI)(AX*2), t, Z0

// func gemvF16x1k(x *float32, w *byte, ws int, k int, dst *float32, nw int, kb int, pfd int, acc *float32)
// gemvF16x1 over a group of nw rows a K block at a time: for each block
// of kb bytes of f16 (a multiple of 128; the block of x, 2*kb bytes,
// stays in the L1) the rows in turn, each row's 16-lane accumulator
// parked in acc (16 floats a row) between blocks. Each output still gets
// one FMA chain over k in order, then the masked tail and REDUCE1:
// gemvF16x1's bits. While it reads a row's block it prefetches into L2
// the block read pfd rows later in time (the same block pfd rows on, or
// past the group's last row the next block of its first rows, or past
// the last block the first block of the next group).
TEXT ·gemvF16x1k(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ ws+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ CX, R9
	SHRQ $4, R9
	SHLQ $5, R9          // R9 = bytes of f16 in whole 16-lane steps
	TAILMASK
	XORQ R10, R10        // R10 = block start (f16 bytes)

kblock:
	MOVQ R10, R11
	ADDQ kb+48(FP), R11
	CMPQ R11, R9
	JLT  kmid
	MOVQ R9, R11         // the last block: to the end of the whole steps

kmid:
	MOVQ R11, R14
	SUBQ R10, R14
	ANDQ $-128, R14
	ADDQ R10, R14        // R14 = end of the block's groups of four steps
	MOVQ w+8(FP), DI
	MOVQ acc+64(FP), DX
	MOVQ dst+32(FP), BX
	MOVQ nw+40(FP), R13

krow:
	TESTQ R13, R13
	JZ    knext
	// R12 = the prefetched row's base: pfd rows on while those are in
	// the group, else the next block of row pfd-(rows left) (or, after
	// the last block, the first block of the next group's rows).
	MOVQ pfd+56(FP), CX
	MOVQ CX, R12
	IMULQ R8, R12
	ADDQ DI, R12
	CMPQ R13, CX
	JGT  kpfset
	CMPQ R11, R9
	JGE  kpflast
	MOVQ nw+40(FP), CX
	IMULQ R8, CX
	SUBQ CX, R12
	ADDQ R11, R12
	SUBQ R10, R12
	JMP  kpfset

kpflast:
	SUBQ R10, R12

kpfset:
	TESTQ R10, R10
	JNZ   kload
	VPXORD Z0, Z0, Z0
	JMP    kgo

kload:
	VMOVUPS (DX), Z0

kgo:
	MOVQ R10, AX         // f16 byte offset; the x offset is twice it

kloop4:
	CMPQ AX, R14
	JGE  kloop1
	PREFETCHT1 (R12)(AX*1)
	PREFETCHT1 64(R12)(AX*1)
	F16KSTEP(0, Z4)
	F16KSTEP(32, Z5)
	F16KSTEP(64, Z6)
	F16KSTEP(96, Z7)
	ADDQ $128, AX
	JMP  kloop4

kloop1:
	CMPQ AX, R11
	JGE  kend
	F16KSTEP(0, Z4)
	ADDQ $32, AX
	JMP  kloop1

kend:
	CMPQ R11, R9
	JGE  ktail
	VMOVUPS Z0, (DX)
	JMP     krownext

ktail:
	KORTESTW K1, K1
	JZ       kreduce
	VMOVUPS.Z   (SI)(AX*2), K1, Z8
	VMOVDQU16.Z (DI)(AX*1), K1, Y9
	VCVTPH2PS   Y9, Z9
	VFMADD231PS Z9, Z8, Z0

kreduce:
	REDUCE1(Z0, Y0, X0)
	VMOVSS X0, (BX)

krownext:
	ADDQ $4, BX
	ADDQ $64, DX
	ADDQ R8, DI
	DECQ R13
	JMP  krow

knext:
	CMPQ R11, R9
	JGE  kdone
	MOVQ R11, R10
	JMP  kblock

kdone:
	VZEROUPPER
	RET
