package main

const q4kIntro = `//go:build amd64 && !purego

#include "textflag.h"

// gemmQ4Kx4 and gemmQ4Kx8 are gemmK (internal/gen/tilegen/ktile.go) for
// the Q4_K tile layout, unrolled for 4 and 8 activation rows; the
// expanders are expandk.go.
//
// Batched Q4_K and Q5_K products with AVX-512 VNNI over an expanded
// 16-row tile. expandQ4K (expandQ5K) writes, per super-block of the tile
// (5248 bytes):
//
//	0     values: sub-block s, values 4k..4k+3 of row r at 512*s + 64*k + 4*r
//	      (unsigned bytes: 0..15, with Q5_K's fifth bit 0..31)
//	4096  scales: int32 sc of sub-block s, row r at 64*s + 4*r
//	4608  mins: int16 pair (m, m) of sub-block s, row r at 64*s + 4*r
//	5120  f32 d of the 16 rows, then at 5184 f32 dmin
//
// so that each 64-byte vector holds the 16 rows in its lanes. Per
// super-block and activation row (the 16 rows in the lanes), with
// VPDPBUSD (unsigned weights times signed activations) and VPDPWSSD:
//
//	isum = sum over s of sc[s] * sum(w*q over sub-block s)
//	msum = sum over groups g of 16 of m[g/2] * bsum[g]
//
// exact in int32, then acc + (float32(d*dx)*float32(isum) -
// float32(dmin*dx)*float32(msum)), superBlock's float order (qdot.go).
// dst[i*ds+r] receives row r (set in mask) for activation row i at
// x + i*xs.

DATA q4kMask0F<>+0(SB)/4, $0x0f0f0f0f
GLOBL q4kMask0F<>(SB), RODATA|NOPTR, $4
DATA q4kMask3F<>+0(SB)/4, $0x0000003f
GLOBL q4kMask3F<>(SB), RODATA|NOPTR, $4
DATA q4kMask0F1<>+0(SB)/4, $0x0000000f
GLOBL q4kMask0F1<>(SB), RODATA|NOPTR, $4
DATA q4kMask30<>+0(SB)/4, $0x00000030
GLOBL q4kMask30<>(SB), RODATA|NOPTR, $4
DATA q4kMask10<>+0(SB)/4, $0x10101010
GLOBL q4kMask10<>(SB), RODATA|NOPTR, $4

// func expandQ4K(dst *byte, w *byte, rb int, nb int)
//
// Loads 16 bytes of each of the 16 rows (rb apart, all readable: the
// caller pads a short tile) and transposes them 4x4 within the 128-bit
// lanes, so that each vector holds one dword of the 16 rows, then splits
// them into the tile layout above.
`

const q5kIntro = `
// func expandQ5K(dst *byte, w *byte, rb int, nb int)
//
// As expandQ4K, the fifth bit of value l of sub-block s being bit s of
// qh[l]: values 0..31, multiplied by gemmQ4Kx4/x8 unchanged.
`
