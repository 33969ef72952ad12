//go:build amd64 && !purego

package ml

// gemvBF16x8 is gemvF16x8 over bf16 rows (bf16mv_amd64.s).
//
//go:noescape
func gemvBF16x8(x *float32, w *byte, ws int, k int, dst *float32, nw int)

// gemvBF16x1 is gemvF16x1 over bf16 rows (f16mv1_amd64.s), taken for the
// same rows (f16Linear, f16LinearMaxK).
//
//go:noescape
func gemvBF16x1(x *float32, w *byte, ws int, k int, dst *float32, nw int)

// matvecBF16 computes outputs [lo,n4) of a one-row BF16 product with
// AVX-512 (n4-lo a multiple of 4), streaming the weights straight from
// memory: eight rows per kernel pass, a leftover group of four decoded and
// passed through gemv. Both give gemvF32's bits on the decoded rows, as
// the tile path of a batch does, so a row's result does not depend on the
// batch it is in. Before it one-row BF16 products decoded every row into
// a tile first and ran at about a tenth of the read bandwidth
// (BenchmarkMatVecCore).
func matvecBF16(x []float32, w *Matrix, rb, K int, dst []float32, lo, n4 int) {
	if f16Linear && K <= f16LinearMaxK {
		gemvBF16x1(&x[0], &w.Data[lo*rb], rb, K, &dst[lo], n4-lo)
		return
	}
	n8 := lo + (n4-lo)&^7
	if n8 > lo {
		gemvBF16x8(&x[0], &w.Data[lo*rb], rb, K, &dst[lo], n8-lo)
	}
	if n4 > n8 {
		buf := getScratch((n4 - n8) * K)
		for r := n8; r < n4; r++ {
			dequantRow((*buf)[(r-n8)*K:(r-n8+1)*K], w.Type, w.Data[r*rb:(r+1)*rb])
		}
		gemv(x, *buf, K, K, dst[n8:], n4-n8)
		scratch.Put(buf)
	}
}

// f16PfRows is how many rows ahead the eight-row F16 and BF16 matvecs
// (gemvF16x8, gemvBF16x8) prefetch into L2: a pass over eight rows asks,
// four lines a step, for the eight rows f16PfRows on (the hardware
// prefetchers alone left one core at 24-26 weight GB per thread-CPU-second
// on the 8B shapes; 8 rows ahead gave 19-27 against 18-25 alternating, 16
// rows 28-29 against 24-27: BenchmarkMatVecCore). A variable for that
// benchmark's A/B; 0 prefetches the rows being read.
var f16PfRows = 16
