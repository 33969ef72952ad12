//go:build amd64 && !purego

package ml

// Q4_1, Q5_1 and IQ4_XS kernels (q41_amd64.s, iq4xs_amd64.s). Q4_1 and
// Q5_1 carry an offset term per block that the Q8_0 tile kernels have no
// place for, so they get their own: AVX2 four-output kernels like
// kqQ40Dot4AVX2, and AVX-512 VNNI 16-row gemv kernels like gemvQ40VNNI
// with the offset added per block. IQ4_XS is Q4_K's structure with the
// IQ4_NL code book and has four-output kernels like Q4_K's.

//go:noescape
func kqQ41Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ51Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqIQ4XSDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqIQ4XSDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func gemvQ41VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

//go:noescape
func gemvQ51VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

// matmulOffSIMD computes output columns [lo,hi) for Q4_1, Q5_1 and IQ4_XS
// and reports true, or false when the SIMD level has no kernel.
func matmulOffSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	if !useKQAVX2() {
		return false
	}
	var kern kqKernel
	var gemv gemv16Kernel
	bs, abs := 32, q8ActBlock
	switch w.Type {
	case Q4_1:
		kern, gemv = kqQ41Dot4AVX2, gemvQ41VNNI
	case Q5_1:
		kern, gemv = kqQ51Dot4AVX2, gemvQ51VNNI
	case IQ4_XS:
		kern, bs, abs = kqIQ4XSDot4AVX2, 256, q8KActBlock
		if useQ8VNNI() {
			kern = kqIQ4XSDot4VNNI
		}
	default:
		return false
	}
	R, nb := w.Rows, w.Cols/bs
	as := nb * abs
	if gemv != nil && useQ8VNNI() {
		if n < 4 {
			for i := 0; i < n; i++ {
				matvec16VNNI(gemv, dst[i*R:], act[i*as:], w, rb, lo, hi)
			}
			return true
		}
		gemmTiles16(gemv, dst, act, n, w, rb, lo, hi)
		return true
	}
	if n < 4 {
		for i := 0; i < n; i++ {
			matvecK(kern, nb, dst[i*R:(i+1)*R], act[i*as:(i+1)*as], w, rb, lo, hi)
		}
		return true
	}
	// One weight row (L1-resident after the first call) against four
	// activation rows per call (ws = 0); the leftover rows through the
	// window of the last four.
	var out [4]float32
	for r := lo; r < hi; r++ {
		row := &w.Data[r*rb]
		i := 0
		for ; i+4 <= n; i += 4 {
			kern(row, 0, &act[i*as], as, nb, &out[0])
			dst[i*R+r] = out[0]
			dst[(i+1)*R+r] = out[1]
			dst[(i+2)*R+r] = out[2]
			dst[(i+3)*R+r] = out[3]
		}
		if i < n {
			kern(row, 0, &act[(n-4)*as], as, nb, &out[0])
			for ; i < n; i++ {
				dst[i*R+r] = out[i-(n-4)]
			}
		}
	}
	return true
}

// gemmTiles16 runs a 16-row gemv kernel over each tile of rows [lo,hi)
// for every activation row in turn, so a tile is read from memory once
// and then from cache.
func gemmTiles16(gemv gemv16Kernel, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as := nb * q8ActBlock
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		src, mask := &w.Data[t0*rb], uint16(0xffff)
		var pad *[]byte
		if rows < q8TileRows {
			pad = paddedRows(w, rb, t0, rows, q8TileRows)
			src, mask = &(*pad)[0], uint16(1)<<rows-1
		}
		for i := 0; i < n; i++ {
			gemv(src, rb, nb, &act[i*as], &dst[i*R+t0], mask, 0)
		}
		if pad != nil {
			byteScratch.Put(pad)
		}
	}
}
