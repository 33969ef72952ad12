//go:build amd64 && !purego

package ml

// gemmF16x4 is gemmF32x4 over f16 weight rows (ws in bytes), converting
// them as they are loaded (floatmm_amd64.s).
//
//go:noescape
func gemmF16x4(x *float32, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int, pf *byte)

// f16TileBytes bounds the f16 weight tile the F16 GEMM sweeps all
// activation rows across.
const f16TileBytes = 16 << 10

// matmulF16AVX512 computes output columns [lo,hi) of an F16 product with
// n > 1 activation rows straight from the f16 rows, four activation rows
// by four weight rows per micro-kernel step, the same arithmetic as the
// decoded-tile path (gemm4/gemv on the decoded rows): the kernels convert
// f16 exactly and keep gemmF32x4's FMA chains and reduction, so outputs do
// not depend on which path or batch size computed them. (BF16 weights
// have their own products, llama.cpp's arithmetic: matmulBF16SIMD.)
func matmulF16AVX512(dst, x []float32, n int, w *Matrix, rb, lo, hi int) {
	R, K := w.Rows, w.Cols
	gemmK, gemvK := gemmF16x4, gemvF16
	tr := max(4, f16TileBytes/rb&^3)
	for t0 := lo; t0 < hi; t0 += tr {
		t1 := min(t0+tr, hi)
		nr := t1 - t0
		nr4 := nr &^ 3
		tile := w.Data[t0*rb : t1*rb]
		// The next tile, prefetched piecewise by the kernel calls below
		// (128 bytes per 16-lane step and row group) so that its DRAM
		// reads overlap this tile's arithmetic.
		next := w.Data[t1*rb : min(t1+tr, hi)*rb]
		span := (nr4 / 4) * (K / 16) * 128
		i := 0
		if nr4 > 0 {
			for ; i+4 <= n; i += 4 {
				pf := &tile[0]
				if off := (i / 4) * span; off < len(next) {
					pf = &next[off]
				}
				gemmK(&x[i*K], K, &tile[0], rb, K, &dst[i*R+t0], R, nr4, pf)
			}
			for ; i < n; i++ {
				gemvK(&x[i*K], &tile[0], rb, K, &dst[i*R+t0], nr4)
			}
		}
		if nr4 < nr {
			buf := getScratch((nr - nr4) * K)
			for r := t0 + nr4; r < t1; r++ {
				dequantRow((*buf)[(r-t0-nr4)*K:(r-t0-nr4+1)*K], w.Type, w.Data[r*rb:(r+1)*rb])
			}
			tailRows(dst, x, n, R, K, *buf, t0+nr4, nr-nr4)
			scratch.Put(buf)
		}
	}
}
