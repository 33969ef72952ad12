//go:build amd64 && !purego

package ml

// gemvF16x4k is gemvF16 over a group of nw rows (nw and pfd multiples of
// 4) a K block of kb bytes at a time, four rows at a time, accumulators
// parked in acc (16 floats a row) between blocks, prefetching the rows
// read pfd rows later (f16mvk_amd64.s).
//
//go:noescape
func gemvF16x4k(x *float32, w *byte, ws int, k int, dst *float32, nw int, kb int, pfd int, acc *float32)

// f16Blocked sends the AVX-512 one-row F16 products through gemvF16Long
// (a variable for BenchmarkMatVecCore's A/B against gemvF16x8).
var f16Blocked = true

// gemvF16Long's shape: row groups of f16LongRows (at most f16LongMaxRows),
// K blocks of at most f16LongK columns (x of 4*f16LongK bytes: 16 KB of
// the 48 KB L1) split evenly, prefetch f16LongPfBytes ahead in read
// order. On a Sapphire Rapids core the rate barely moved with the group
// (8 to 64 rows) or the block (2048 to 8192 columns), and the prefetch
// is worth 1.13-1.17x on rows from DRAM (BenchmarkF16Kernels).
var (
	f16LongRows    = 32
	f16LongK       = 4096
	f16LongPfBytes = 8192
)

const f16LongMaxRows = 64

// gemvF16Long computes dst[r] = w row r · x for r in [0,nw), rows ws bytes
// apart, with gemvF16x4k (leftover rows through gemvF16x1): gemvF16's bits.
// gemvF16x1's one FMA chain per row holds a core to one FMA per FMA
// latency, and a row's x read per row comes from L2 once x outgrows the
// L1; gemvF16x8's eight streams read slower than a few. One core, weight
// GB per thread-CPU-second against gemvF16x8 (BenchmarkF16Kernels, ratios
// in one run, Sapphire Rapids): 4096x14336 1.14-1.19x, 14336x4096
// 1.04-1.13x, 2048x5632 1.00-1.07x, 32000x2048 1.01-1.06x, 0.98-0.99x in
// L2; gemvF16x1 0.83-1.02x, 0.4x in L2.
func gemvF16Long(x *float32, w []byte, ws, k int, dst []float32, nw int) {
	var acc [f16LongMaxRows * 16]float32
	nb := (k + f16LongK - 1) / f16LongK
	kb := ((k+nb-1)/nb + 63) &^ 63 * 2 // f16 bytes, a multiple of 128
	g := max(min(f16LongRows, f16LongMaxRows)&^3, 4)
	pfd := ((f16LongPfBytes+kb-1)/kb + 3) &^ 3
	n4 := nw &^ 3
	for r := 0; r < n4; r += g {
		gemvF16x4k(x, &w[r*ws], ws, k, &dst[r], min(g, n4-r), kb, pfd, &acc[0])
	}
	if n4 < nw {
		gemvF16x1(x, &w[n4*ws], ws, k, &dst[n4], nw-n4)
	}
}
