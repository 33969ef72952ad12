//go:build amd64 && !purego

package ml

// Q4_0, IQ4_NL and Q5_0 through the Q8_0 kernels. Their values fit in
// int8 and their reference arithmetic (dot32 without an offset: exact
// int32 block sum s, then acc + float32(s)*(d*dx)) is Q8_0's, so a weight
// tile expanded into Q8_0 blocks (same f16 scale, values as int8) gives the
// same bits through the tiled Q8_0 kernels. The expansion is a few
// instructions per block into an L1-resident buffer; the products then run
// at Q8_0's rate (VPDPBUSD over 16-row tiles, scales vectorised over rows)
// instead of per-row horizontal sums.

//go:noescape
func expandQ40(dst *byte, w *byte, rb int, rows int, nb int)

//go:noescape
func expandIQ4NL(dst *byte, w *byte, rb int, rows int, nb int)

//go:noescape
func expandQ50(dst *byte, w *byte, rb int, rows int, nb int)

// gemvQ40VNNI is gemvQ8VNNI for 16 Q4_0 rows, reading the nibbles in
// place (see expand_amd64.s).
//
//go:noescape
func gemvQ40VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

// gemvIQ4NLVNNI is gemvQ40VNNI for IQ4_NL (code book lookup in registers).
//
//go:noescape
func gemvIQ4NLVNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

// gemvQ50VNNI is gemvQ40VNNI for Q5_0 (high bits added under a byte mask).
//
//go:noescape
func gemvQ50VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

type gemv16Kernel func(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

type expandKernel func(dst *byte, w *byte, rb int, rows int, nb int)

// q8BlockBytes is the size of one Q8_0 block.
const q8BlockBytes = 34

// matmulExpandSIMD computes output columns [lo,hi) for a weight type with
// an expansion into Q8_0 and reports true, or false when the type or the
// SIMD level has none. Q4_0 takes it only with VNNI (its own AVX2 kernels
// are as fast without).
func matmulExpandSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	var expand expandKernel
	switch w.Type {
	case Q4_0:
		if !useQ8VNNI() {
			return false
		}
		expand = expandQ40
	case IQ4_NL:
		expand = expandIQ4NL
	case Q5_0:
		expand = expandQ50
	default:
		return false
	}
	switch {
	case useQ8VNNI() && n < 4 && (w.Type != IQ4_NL || useVBMI()): // gemvIQ4NLVNNI's code book lookups are VPERMB
		gemv := gemvQ40VNNI
		switch w.Type {
		case IQ4_NL:
			gemv = gemvIQ4NLVNNI
		case Q5_0:
			gemv = gemvQ50VNNI
		}
		for i := 0; i < n; i++ {
			matvec16VNNI(gemv, dst[i*w.Rows:], act[i*w.Cols/32*q8ActBlock:], w, rb, lo, hi)
		}
	case useQ8VNNI():
		matmulExpandVNNI(expand, dst, act, n, w, rb, lo, hi)
	case useQ8AVX2():
		matmulExpandAVX2(expand, dst, act, n, w, rb, lo, hi)
	default:
		return false
	}
	return true
}

// matmulExpandVNNI expands each 16-row tile (zero rows, hence zero scales,
// pad a partial one; the masked stores drop them), then runs the Q8_0
// matvec on it, or packs it once and sweeps it with all activation rows.
func matmulExpandVNNI(expand expandKernel, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as, qrb := nb*q8ActBlock, nb*q8BlockBytes
	ep := getBytes(q8TileRows * qrb)
	defer byteScratch.Put(ep)
	exp := *ep
	var tile []byte
	if n > 1 {
		tp := getBytes(nb * q8PackBlock)
		defer byteScratch.Put(tp)
		tile = *tp
	}
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		expand(&exp[0], &w.Data[t0*rb], rb, rows, nb)
		if rows < q8TileRows {
			clear(exp[rows*qrb:])
		}
		mask := uint16(1)<<rows - 1
		if n == 1 {
			gemvQ8VNNI(&exp[0], qrb, nb, &act[0], &dst[t0], mask, 0)
			continue
		}
		packQ8Tile(&tile[0], &exp[0], qrb, nb, 0)
		a := 0
		for ; a+8 <= n; a += 8 {
			gemmQ8x8(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
		}
		if a+4 <= n {
			gemmQ8x4(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
			a += 4
		}
		for ; a < n; a++ {
			gemmQ8x1(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
		}
	}
}

// matmulExpandAVX2 expands 8-row tiles for the AVX2 Q8_0 kernel, each
// tile then L1-resident for every activation row.
func matmulExpandAVX2(expand expandKernel, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as, qrb := nb*q8ActBlock, nb*q8BlockBytes
	ep := getBytes(q8AVX2Rows * qrb)
	defer byteScratch.Put(ep)
	exp := *ep
	var out [q8AVX2Rows]float32
	for t0 := lo; t0 < hi; t0 += q8AVX2Rows {
		rows := min(q8AVX2Rows, hi-t0)
		expand(&exp[0], &w.Data[t0*rb], rb, rows, nb)
		if rows < q8AVX2Rows {
			clear(exp[rows*qrb:])
		}
		for a := 0; a < n; a++ {
			gemvQ8AVX2(&exp[0], qrb, nb, &act[a*as], &out[0])
			copy(dst[a*R+t0:a*R+t0+rows], out[:rows])
		}
	}
}

// matvec16VNNI computes dst[r], r in [lo,hi), for one activation row
// straight from the weight rows, 16 per gemv call, prefetching ahead.
func matvec16VNNI(gemv gemv16Kernel, dst []float32, act []byte, w *Matrix, rb, lo, hi int) {
	nb := w.Cols / 32
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		if rows < q8TileRows {
			pad := paddedRows(w, rb, t0, rows, q8TileRows)
			gemv(&(*pad)[0], rb, nb, &act[0], &dst[t0], uint16(1)<<rows-1, 0)
			byteScratch.Put(pad)
			continue
		}
		// Prefetch two tiles ahead: a tile of Q4_0 is computed in about
		// the time one tile's DRAM reads take (one tile ahead measured
		// 105-183 tokens/s decode, two 186-208, stories110M Q4_0).
		pfd := 0
		if t0+3*q8TileRows <= w.Rows {
			pfd = 2 * q8TileRows * rb
		}
		gemv(&w.Data[t0*rb], rb, nb, &act[0], &dst[t0], 0xffff, pfd)
	}
}
