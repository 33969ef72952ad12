//go:build amd64 && !purego

package ml

// gemvF16x1k is gemvF16x1 over a group of nw rows a K block of kb bytes
// at a time, accumulators parked in acc (16 floats a row) between blocks,
// prefetching the block read pfd rows later (f16mvk_amd64.s).
//
//go:noescape
func gemvF16x1k(x *float32, w *byte, ws int, k int, dst *float32, nw int, kb int, pfd int, acc *float32)

// gemvF16x4k is gemvF16x1k four rows at a time (nw and pfd multiples of
// 4).
//
//go:noescape
func gemvF16x4k(x *float32, w *byte, ws int, k int, dst *float32, nw int, kb int, pfd int, acc *float32)

// f16LongQuad selects gemvF16x4k in gemvF16Long.
var f16LongQuad = true

// f16LongRows is the row group of gemvF16Long, f16LongK the most columns
// of a K block (x of 4*f16LongK bytes).
var (
	f16LongRows = 16
	f16LongK    = 4096
)

const f16LongMaxRows = 64

// gemvF16Long is gemvF16x1 for rows too long for x to stay in the L1.
func gemvF16Long(x *float32, w []byte, ws, k int, dst []float32, nw int) {
	var acc [f16LongMaxRows * 16]float32
	nb := (k + f16LongK - 1) / f16LongK
	kb := ((k+nb-1)/nb + 63) &^ 63 * 2 // f16 bytes, a multiple of 128
	g := min(f16LongRows, f16LongMaxRows)
	pfd := (f16PfBytes + kb - 1) / kb
	if f16LongQuad {
		g &^= 3
		pfd = (pfd + 3) &^ 3
		n4 := nw &^ 3
		for r := 0; r < n4; r += g {
			n := min(g, n4-r)
			gemvF16x4k(x, &w[r*ws], ws, k, &dst[r], n, kb, pfd, &acc[0])
		}
		if n4 < nw {
			gemvF16x1(x, &w[n4*ws], ws, k, &dst[n4], nw-n4)
		}
		return
	}
	for r := 0; r < nw; r += g {
		n := min(g, nw-r)
		gemvF16x1k(x, &w[r*ws], ws, k, &dst[r], n, kb, pfd, &acc[0])
	}
}
