//go:build amd64 && !purego

package ml

// MXFP4 through the Q8_0 kernels. An MXFP4 block's values (doubled E2M1
// codes, -12..12) fit in int8 and its scale is a power of two, so where
// f16 holds that power (2^-24..2^15: subnormals included, which the
// kernels' VCVTPH2PS converts exactly) the block is a Q8_0 block with the
// same reference arithmetic (dot32 without an offset), and a tile expanded
// into Q8_0 gives the same bits through the tiled Q8_0 kernels, as for
// IQ4_NL (expand_amd64.go). Scales outside that range (not produced by
// llama-quantize for weights of ordinary magnitude, but legal) make their
// tile fall back to the reference arithmetic.

//go:noescape
func expandMXFP4(dst *byte, w *byte, rb int, rows int, nb int, tab *uint16) int

// gemvMXFP4VNNI is gemvIQ4NLVNNI for MXFP4: 16 rows read in place, the
// E8M0 scales converted exactly in registers (no range limit).
//
//go:noescape
func gemvMXFP4VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

// mxfp4F16Scale maps an E8M0 byte to the f16 bits of e8m0Half, or 0xffff
// where f16 has no such value.
var mxfp4F16Scale = func() (t [256]uint16) {
	for e := range t {
		switch {
		case e >= 114 && e <= 143: // normal: exponent field e-128+15
			t[e] = uint16(e-113) << 10
		case e >= 104 && e <= 113: // subnormal: mantissa * 2^-24
			t[e] = 1 << (e - 104)
		default:
			t[e] = 0xffff
		}
	}
	return t
}()

// matmulMXFP4SIMD computes output columns [lo,hi) as matmulExpandSIMD
// does for IQ4_NL, and reports false without AVX2: with VNNI and VBMI, up
// to three activation rows straight from the weight rows, more (or any
// number, without VBMI) through expanded tiles packed once; with AVX2
// only, expanded 8-row tiles.
func matmulMXFP4SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	vnni := useQ8VNNI()
	if n < 4 && useVBMI() { // gemvMXFP4VNNI looks the codes up with VPERMB
		for i := 0; i < n; i++ {
			matvec16VNNI(gemvMXFP4VNNI, dst[i*w.Rows:], act[i*w.Cols/32*q8ActBlock:], w, rb, lo, hi)
		}
		return true
	}
	tileRows := q8TileRows
	switch {
	case vnni:
	case useQ8AVX2():
		tileRows = q8AVX2Rows
	default:
		return false
	}
	R, nb := w.Rows, w.Cols/32
	as, qrb := nb*q8ActBlock, nb*q8BlockBytes
	ep := getBytes(tileRows * qrb)
	defer byteScratch.Put(ep)
	exp := *ep
	var tile []byte
	if vnni {
		tp := getBytes(nb * q8PackBlock)
		defer byteScratch.Put(tp)
		tile = *tp
	}
	var out [q8AVX2Rows]float32
	for t0 := lo; t0 < hi; t0 += tileRows {
		rows := min(tileRows, hi-t0)
		if expandMXFP4(&exp[0], &w.Data[t0*rb], rb, rows, nb, &mxfp4F16Scale[0]) != 0 {
			matmulIntGeneric(dst, act, n, w, rb, t0, t0+rows)
			continue
		}
		if rows < tileRows {
			clear(exp[rows*qrb:])
		}
		if !vnni {
			for a := 0; a < n; a++ {
				gemvQ8AVX2(&exp[0], qrb, nb, &act[a*as], &out[0])
				copy(dst[a*R+t0:a*R+t0+rows], out[:rows])
			}
			continue
		}
		mask := uint16(1)<<rows - 1
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
	return true
}
