package main

const iq4xsIntro = `//go:build amd64 && !purego

#include "textflag.h"

// Batched IQ4_XS products with AVX-512 VNNI over a packed 16-row tile.
// expandIQ4XS turns each super-block of a row into eight Q8_0 blocks (the
// code book values as int8, and as the block "scale" the f16 of the
// sub-block scale ls-32, an exact small integer) and writes the rows'
// f16 d to d + 32*superblock + 2*row; packQ8Tile packs them (values
// biased by 128, the sub-block scales converted to f32). Per super-block,
// sub-block ib and activation row i, for the 16 rows in the lanes:
//
//	s    = -128*(bsum[2ib]+bsum[2ib+1]) + sum of (w+128)*q   (= sum w*q)
//	isum = isum + (ls-32)*s
//
// all exact in int32, then acc + float32(d*dx)*float32(isum), which is
// dotK's arithmetic (qdot.go) bit for bit (the zero min term of
// superBlock changes no bits, see iq4xs_amd64.s). dst[i*ds+r] receives
// row r (set in mask) for activation row i at x + i*xs.

DATA iqxOnes16<>+0(SB)/4, $0x00010001
GLOBL iqxOnes16<>(SB), RODATA|NOPTR, $4
`

const q41Intro = `//go:build amd64 && !purego

#include "textflag.h"

// Batched Q4_1 and Q5_1 products with AVX-512 VNNI, as gemmQ8x4 and
// gemmQ8x8 (kernels_q8_amd64.s) with the offset term: the weight tile is
// expanded into Q8_0 blocks (values 0..31, see expandQ41/expandQ51) and
// packed by packQ8Tile (16 rows x 4 bytes per vector, biased by 128; the
// activation bias -128*sum(q) starts each int32 accumulator and removes
// that bias exactly), the rows' offsets m as f16 at m + 32*block. Per
// block and activation row i, for the 16 rows in the lanes:
//
//	acc = acc + float32(s)*float32(d*dx)
//	acc = acc - float32(bias>>7)*float32(m*dx)   (bias>>7 = -sum(q))
//
// which is dot32's arithmetic with the offset (qdot.go) bit for bit.
// dst[i*ds+r] receives row r (set in mask) for activation row i at
// x + i*xs.
`
