package main

const q6kIntro = `//go:build amd64 && !purego

#include "textflag.h"

// gemmQ6Kx4 and gemmQ6Kx8 are gemmK (internal/gen/tilegen/ktile.go) for
// the Q6_K tile layout, unrolled for 4 and 8 activation rows; the
// expander is in q6k.go there.
//
// Batched Q6_K products with AVX-512 VNNI over an expanded 16-row tile,
// as the Q4_K ones (q4kgemm_amd64.s). expandQ6K writes, per super-block of
// the tile (5696 bytes):
//
//	0     values w+32 (0..63) as unsigned bytes: values 32s+4k..32s+4k+3
//	      of row r at 512*s + 64*k + 4*r
//	4096  scales: int32 sc of group g (16 values), row r at 64*g + 4*r
//	5120  int16 pairs (sc[2s], sc[2s+1]), row r at 64*s + 4*r
//	5632  f32 d of the 16 rows
//
// Per super-block and activation row, exact in int32:
//
//	isum = sum over groups g of sc[g] * sum((w+32)*q over g)
//	       - 32 * sum over g of sc[g]*bsum[g]          (= sum sc*w*q)
//
// then acc + float32(d*dx)*float32(isum): superBlock's order (qdot.go),
// whose zero min term changes no bits (acc, starting at +0, is never -0).

DATA q6kMask0F<>+0(SB)/4, $0x0f0f0f0f
GLOBL q6kMask0F<>(SB), RODATA|NOPTR, $4
DATA q6kMask30<>+0(SB)/4, $0x30303030
GLOBL q6kMask30<>(SB), RODATA|NOPTR, $4
DATA q6kMaskFFFF<>+0(SB)/4, $0x0000ffff
GLOBL q6kMaskFFFF<>(SB), RODATA|NOPTR, $4

// func expandQ6K(dst *byte, w *byte, rb int, nb int)
//
// Loads 16 bytes of each of the 16 rows (rb apart, all readable: the
// caller pads a short tile) and transposes them 4x4 within the 128-bit
// lanes, so that each vector holds one dword of the 16 rows, then splits
// them into the tile layout above.
`
