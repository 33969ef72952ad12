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

// One weight row against four activation rows (ws ignored), the values
// decoded once for the four.
//
//go:noescape
func kqIQ4XSRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqIQ4XSRow4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

// Expansion into Q8_0 blocks plus the offsets, and the batched kernels
// over the packed tile (q41gemm_amd64.s).
//
//go:noescape
func expandQ41(dst *byte, w *byte, rb int, rows int, nb int, m *byte)

//go:noescape
func expandQ51(dst *byte, w *byte, rb int, rows int, nb int, m *byte)

//go:noescape
func gemmOffx4(x *byte, xs int, w *byte, m *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmOffx8(x *byte, xs int, w *byte, m *byte, nb int, dst *float32, ds int, mask uint16)

// Eight weight rows against one activation row (AVX2).
//
//go:noescape
func gemvQ41AVX2(w *byte, rb int, nb int, x *byte, dst *float32)

//go:noescape
func gemvQ51AVX2(w *byte, rb int, nb int, x *byte, dst *float32)

// IQ4_XS batches with VNNI over packed tiles (iq4xsgemm_amd64.s).
//
//go:noescape
func expandIQ4XS(dst *byte, w *byte, rb int, rows int, nb int, d *byte)

//go:noescape
func gemmIQ4XSx4(x *byte, xs int, w *byte, d *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmIQ4XSx8(x *byte, xs int, w *byte, d *byte, nb int, dst *float32, ds int, mask uint16)

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
	var kern, row4 kqKernel
	var gemv gemv16Kernel
	var expand expandOffKernel
	var gemv8 func(w *byte, rb int, nb int, x *byte, dst *float32)
	bs, abs := 32, q8ActBlock
	switch w.Type {
	case Q4_1:
		kern, gemv, expand, gemv8 = kqQ41Dot4AVX2, gemvQ41VNNI, expandQ41, gemvQ41AVX2
	case Q5_1:
		kern, gemv, expand, gemv8 = kqQ51Dot4AVX2, gemvQ51VNNI, expandQ51, gemvQ51AVX2
	case IQ4_XS:
		kern, row4, bs, abs = kqIQ4XSDot4AVX2, kqIQ4XSRow4AVX2, 256, q8KActBlock
		if useQ8VNNI() {
			kern, row4 = kqIQ4XSDot4VNNI, kqIQ4XSRow4VNNI
		}
	default:
		return false
	}
	R, nb := w.Rows, w.Cols/bs
	as := nb * abs
	if w.Type == IQ4_XS && useQ8VNNI() && n >= 4 {
		gemmIQ4XSVNNI(dst, act, n, w, rb, lo, hi)
		return true
	}
	if gemv != nil && useQ8VNNI() {
		if n < 4 {
			for i := 0; i < n; i++ {
				matvec16VNNI(gemv, dst[i*R:], act[i*as:], w, rb, lo, hi)
			}
			return true
		}
		gemmOffVNNI(expand, dst, act, n, w, rb, lo, hi)
		return true
	}
	if gemv8 != nil {
		// Eight-row tiles, each swept by every activation row while it
		// is in L1; the last rows (fewer than eight) as below.
		var out [8]float32
		for ; lo+8 <= hi; lo += 8 {
			for i := 0; i < n; i++ {
				gemv8(&w.Data[lo*rb], rb, nb, &act[i*as], &out[0])
				copy(dst[i*R+lo:i*R+lo+8], out[:])
			}
		}
		if lo == hi {
			return true
		}
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
	if row4 == nil {
		row4 = kern // with ws = 0 a four-output kernel is a Row4 kernel
	}
	var out [4]float32
	for r := lo; r < hi; r++ {
		row := &w.Data[r*rb]
		i := 0
		for ; i+4 <= n; i += 4 {
			row4(row, 0, &act[i*as], as, nb, &out[0])
			dst[i*R+r] = out[0]
			dst[(i+1)*R+r] = out[1]
			dst[(i+2)*R+r] = out[2]
			dst[(i+3)*R+r] = out[3]
		}
		if i < n {
			row4(row, 0, &act[(n-4)*as], as, nb, &out[0])
			for ; i < n; i++ {
				dst[i*R+r] = out[i-(n-4)]
			}
		}
	}
	return true
}

type expandOffKernel func(dst *byte, w *byte, rb int, rows int, nb int, m *byte)

// gemmOffVNNI expands and packs each 16-row tile of Q4_1 or Q5_1 once,
// then sweeps it with eight or four activation rows per call; a leftover
// of fewer than four goes through the window of the last four (rewriting
// some outputs with the same bits). n must be at least 4.
func gemmOffVNNI(expand expandOffKernel, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as, qrb := nb*q8ActBlock, nb*q8BlockBytes
	ep := getBytes(q8TileRows * qrb)
	defer byteScratch.Put(ep)
	tp := getBytes(nb * q8PackBlock)
	defer byteScratch.Put(tp)
	mp := getBytes(nb * 2 * q8TileRows)
	defer byteScratch.Put(mp)
	exp, tile, ms := *ep, *tp, *mp
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		if rows < q8TileRows {
			// Zero scales and offsets in the padding rows (their
			// lanes are not stored).
			clear(exp[rows*qrb:])
			clear(ms)
		}
		expand(&exp[0], &w.Data[t0*rb], rb, rows, nb, &ms[0])
		packQ8Tile(&tile[0], &exp[0], qrb, nb, 0)
		mask := uint16(1)<<rows - 1
		a := 0
		for ; a+8 <= n; a += 8 {
			gemmOffx8(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
		}
		if a+4 <= n {
			gemmOffx4(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
			a += 4
		}
		if a < n {
			a = n - 4
			gemmOffx4(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
		}
	}
}

// gemmIQ4XSVNNI is gemmOffVNNI for IQ4_XS: each 16-row tile expanded
// into sub-blocks with integer scales and packed once, then swept with
// eight or four activation rows per call. n must be at least 4.
func gemmIQ4XSVNNI(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/256
	as, qrb := nb*q8KActBlock, nb*8*q8BlockBytes
	ep := getBytes(q8TileRows * qrb)
	defer byteScratch.Put(ep)
	tp := getBytes(nb * 8 * q8PackBlock)
	defer byteScratch.Put(tp)
	dp := getBytes(nb * 2 * q8TileRows)
	defer byteScratch.Put(dp)
	exp, tile, ds := *ep, *tp, *dp
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		if rows < q8TileRows {
			clear(exp[rows*qrb:])
			clear(ds)
		}
		expandIQ4XS(&exp[0], &w.Data[t0*rb], rb, rows, nb, &ds[0])
		packQ8Tile(&tile[0], &exp[0], qrb, nb*8, 0)
		mask := uint16(1)<<rows - 1
		a := 0
		for ; a+8 <= n; a += 8 {
			gemmIQ4XSx8(&act[a*as], as, &tile[0], &ds[0], nb, &dst[a*R+t0], R, mask)
		}
		if a+4 <= n {
			gemmIQ4XSx4(&act[a*as], as, &tile[0], &ds[0], nb, &dst[a*R+t0], R, mask)
			a += 4
		}
		if a < n {
			a = n - 4
			gemmIQ4XSx4(&act[a*as], as, &tile[0], &ds[0], nb, &dst[a*R+t0], R, mask)
		}
	}
}
