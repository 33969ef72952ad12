//go:build amd64 && !purego

package ml

import "golang.org/x/sys/cpu"

// The kernels in use: AVX-512 where the CPU has it, else AVX2+FMA+F16C,
// else plain Go. Tests and benchmarks switch levels with setSIMDLevel; the
// purego build tag removes the assembly altogether.
var (
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

	useAVX512 = hasAVX512
	useAVX2   = hasAVX2 && !hasAVX512
)

const (
	levelGeneric = iota
	levelAVX2
	levelAVX512
)

func simdLevel() int {
	switch {
	case useAVX512:
		return levelAVX512
	case useAVX2:
		return levelAVX2
	}
	return levelGeneric
}

// setSIMDLevel selects a kernel level; levels the CPU lacks fall back to generic.
func setSIMDLevel(l int) {
	useAVX512 = l == levelAVX512 && hasAVX512
	useAVX2 = l == levelAVX2 && hasAVX2
}

func supportedLevels() []int {
	l := []int{levelGeneric}
	if hasAVX2 {
		l = append(l, levelAVX2)
	}
	if hasAVX512 {
		l = append(l, levelAVX512)
	}
	return l
}

func useSIMD() bool { return useAVX512 || useAVX2 }

func sumSIMD(p []float32) float32 {
	if useAVX512 {
		return sumAVX512(&p[0], len(p))
	}
	var s float32
	for _, v := range p {
		s += v
	}
	return s
}

//go:noescape
func dotAVX2(a, b *float32, n8 int) float32

//go:noescape
func axpyAVX2(dst *float32, a float32, x *float32, n8 int)

//go:noescape
func gemvF32AVX2(x *float32, w *float32, ws int, k8 int, dst *float32, nw int)

//go:noescape
func gemmF32x4AVX2(x *float32, xs int, w *float32, ws int, k8 int, dst *float32, ds int, nw int)

func dot(a, b []float32) float32 {
	switch {
	case len(a) == 0:
		return 0
	case useAVX512:
		return dotAVX512(&a[0], &b[0], len(a))
	case useAVX2:
		n8 := len(a) &^ 7
		var s float32
		if n8 > 0 {
			s = dotAVX2(&a[0], &b[0], n8)
		}
		for i := n8; i < len(a); i++ {
			s += a[i] * b[i]
		}
		return s
	}
	return dotGeneric(a, b)
}

func axpy(dst []float32, a float32, x []float32) {
	switch {
	case useAVX512:
		axpyAVX512(&dst[0], a, &x[0], len(dst))
	case useAVX2:
		n8 := len(dst) &^ 7
		if n8 > 0 {
			axpyAVX2(&dst[0], a, &x[0], n8)
		}
		axpyGeneric(dst[n8:], a, x[n8:])
	default:
		axpyGeneric(dst, a, x)
	}
}

// gemv computes dst[r] = dot(x[:k], w[r*ws:][:k]) for r < nw (a multiple of 4).
func gemv(x, w []float32, ws, k int, dst []float32, nw int) {
	if useAVX512 {
		gemvF32(&x[0], &w[0], ws, k, &dst[0], nw)
		return
	}
	k8 := k &^ 7
	if k8 > 0 {
		gemvF32AVX2(&x[0], &w[0], ws, k8, &dst[0], nw)
	}
	for r := 0; r < nw; r++ {
		s := dotGeneric(x[k8:k], w[r*ws+k8:r*ws+k])
		if k8 > 0 {
			dst[r] += s
		} else {
			dst[r] = s
		}
	}
}

// gemm4 computes dst[i*ds+r] = dot(x[i*xs:][:k], w[r*ws:][:k]) for i < 4 and
// r < nw (a multiple of 4).
func gemm4(x []float32, xs int, w []float32, ws, k int, dst []float32, ds, nw int, pf *byte) {
	if useAVX512 {
		gemmF32x4(&x[0], xs, &w[0], ws, k, &dst[0], ds, nw, pf)
		return
	}
	k8 := k &^ 7
	if k8 > 0 {
		gemmF32x4AVX2(&x[0], xs, &w[0], ws, k8, &dst[0], ds, nw)
	}
	if k8 == k {
		return
	}
	for i := 0; i < 4; i++ {
		for r := 0; r < nw; r++ {
			s := dotGeneric(x[i*xs+k8:i*xs+k], w[r*ws+k8:r*ws+k])
			if k8 > 0 {
				dst[i*ds+r] += s
			} else {
				dst[i*ds+r] = s
			}
		}
	}
}

//go:noescape
func gemmF32x4(x *float32, xs int, w *float32, ws int, k int, dst *float32, ds int, nw int, pf *byte)

//go:noescape
func gemvF32(x *float32, w *float32, ws int, k int, dst *float32, nw int)

//go:noescape
func gemvF16(x *float32, w *byte, ws int, k int, dst *float32, nw int)

// gemvF16x8 is gemvF16 for nw a multiple of 8, eight rows per pass
// (f16mv_amd64.s).
//
//go:noescape
func gemvF16x8(x *float32, w *byte, ws int, k int, dst *float32, nw int)

// gemvF16x1 is gemvF16 one row at a time, any nw (f16mv1_amd64.s).
//
//go:noescape
func gemvF16x1(x *float32, w *byte, ws int, k int, dst *float32, nw int)

// f16PfBytes is how far ahead of its loads gemvF16x1 prefetches into L2:
// 8 KB gave 27.8-28.6 weight GB per CPU-second in one-thread TinyLlama F16
// decode (BenchmarkDecodeBound) against 22.8-23.9 with the hardware
// prefetchers alone (4 KB 22.8-23.9, 16 KB 25.9-27.8).
var f16PfBytes = 8192

// gemvF16AVX2 is gemvF32AVX2 over f16 rows (f16mv_amd64.s); k8 is a
// multiple of 8.
//
//go:noescape
func gemvF16AVX2(x *float32, w *byte, ws int, k8 int, dst *float32, nw int)

//go:noescape
func dotAVX512(a, b *float32, n int) float32

//go:noescape
func axpyAVX512(dst *float32, a float32, x *float32, n int)

//go:noescape
func sumAVX512(p *float32, n int) float32

//go:noescape
func dequantQ8AVX512(dst *float32, src *byte, nb int)

//go:noescape
func dequantF16AVX512(dst *float32, src *byte, n int)

// matvecF16 computes dst[r], r in [lo,n4) (a multiple of 4 rows), from
// the f16 rows: eight rows per pass then four with AVX-512, four with AVX2
// (K a multiple of 8 there, no tail step).
func matvecF16(x []float32, w *Matrix, rb, K int, dst []float32, lo, n4 int) {
	if !useAVX512 {
		gemvF16AVX2(&x[0], &w.Data[lo*rb], rb, K, &dst[lo], n4-lo)
		return
	}
	if f16Blocked {
		gemvF16Long(&x[0], w.Data[lo*rb:], rb, K, dst[lo:], n4-lo)
		return
	}
	n8 := lo + (n4-lo)&^7
	if n8 > lo {
		gemvF16x8(&x[0], &w.Data[lo*rb], rb, K, &dst[lo], n8-lo)
	}
	if n4 > n8 {
		gemvF16(&x[0], &w.Data[n8*rb], rb, K, &dst[n8], n4-n8)
	}
}

// matmulRowsSIMD computes output columns [lo,hi) with the SIMD kernels.
//
// Batch invariance: every output is computed by the gemm4/gemv kernel
// arithmetic (one FMA chain per output over k, the same tail and the same
// horizontal reduction), whatever n is and wherever the row sits in the
// batch or in a thread's chunk. Weight rows left over from a group of four
// go through the same kernels on a zero-padded four-row copy.
func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool {
	R, K := w.Rows, w.Cols
	if n == 1 && (w.Type == F32 || w.Type == F16 && (useAVX512 || K%8 == 0)) {
		// The matvec streams the weights straight from memory.
		n4 := lo + (hi-lo)&^3
		if n4 > lo {
			switch w.Type {
			case F32:
				gemv(x, BytesF32(w.Data)[lo*K:], K, K, dst[lo:], n4-lo)
			default:
				matvecF16(x, w, rb, K, dst, lo, n4)
			}
		}
		if n4 < hi {
			buf := getScratch((hi - n4) * K)
			for r := n4; r < hi; r++ {
				dequantRow((*buf)[(r-n4)*K:(r-n4+1)*K], w.Type, w.Data[r*rb:(r+1)*rb])
			}
			tailRows(dst, x, 1, R, K, *buf, n4, hi-n4)
			scratch.Put(buf)
		}
		return true
	}

	if w.Type == F16 && useAVX512 {
		matmulF16AVX512(dst, x, n, w, rb, lo, hi)
		return true
	}

	// A GEMM (or a matvec over decoded rows). Sweep all activation rows
	// across a tile of weight rows held as f32 (decoded once per tile for
	// other types), four activation rows by four weight rows per
	// micro-kernel step.
	tr := tileRows(K)
	var buf *[]float32
	if w.Type != F32 {
		buf = getScratch(tr * K)
		defer scratch.Put(buf)
	}
	for t0 := lo; t0 < hi; t0 += tr {
		t1 := min(t0+tr, hi)
		var tile []float32
		if w.Type == F32 {
			tile = BytesF32(w.Data[t0*rb : t1*rb])
		} else {
			tile = (*buf)[:(t1-t0)*K]
			for r := t0; r < t1; r++ {
				dequantRow(tile[(r-t0)*K:(r-t0+1)*K], w.Type, w.Data[r*rb:(r+1)*rb])
			}
		}
		nr := t1 - t0
		nr4 := nr &^ 3
		// The encoded next tile, prefetched piecewise by the kernel calls
		// below (128 bytes per 16-lane step), so its DRAM reads overlap
		// this tile's arithmetic.
		next := w.Data[t1*rb : min(t1+tr, hi)*rb]
		span := (nr4 / 4) * (K / 16) * 128
		i := 0
		if nr4 > 0 {
			for ; i+4 <= n; i += 4 {
				pf := &w.Data[t0*rb]
				if off := (i / 4) * span; off < len(next) {
					pf = &next[off]
				}
				gemm4(x[i*K:], K, tile, K, K, dst[i*R+t0:], R, nr4, pf)
			}
			for ; i < n; i++ {
				gemv(x[i*K:], tile, K, K, dst[i*R+t0:], nr4)
			}
		}
		if nr4 < nr {
			tailRows(dst, x, n, R, K, tile[nr4*K:nr*K], t0+nr4, nr-nr4)
		}
	}
	return true
}

// tailRows computes output columns [r0,r0+m), m < 4, from their decoded
// weight rows rows (m x K) with the four-row gemv on a zero-padded copy.
func tailRows(dst, x []float32, n, R, K int, rows []float32, r0, m int) {
	p := getScratch(4*K + 4)
	pad, out := (*p)[:4*K], (*p)[4*K:]
	copy(pad, rows[:m*K])
	clear(pad[m*K:])
	for i := 0; i < n; i++ {
		gemv(x[i*K:(i+1)*K], pad, K, K, out, 4)
		copy(dst[i*R+r0:i*R+r0+m], out[:m])
	}
	scratch.Put(p)
}

var hasVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI

// useQ8VNNI reports whether Q8_0 products use the AVX-512 VNNI kernels.
func useQ8VNNI() bool { return useAVX512 && hasVNNI }

//go:noescape
func quantActQ8AVX512(dst *byte, x *float32, nb int)

//go:noescape
func packQ8Tile(dst *byte, w *byte, rb int, nb int, pfd int)

//go:noescape
func gemmQ8x8(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmQ8x4(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmQ8x1(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

// quantizeActQ8 encodes one activation row (see quantizeActQ8Generic).
func quantizeActQ8(dst []byte, x []float32) {
	if useQ8VNNI() {
		quantActQ8AVX512(&dst[0], &x[0], len(x)/32)
		return
	}
	quantizeActQ8Generic(dst, x)
}

//go:noescape
func gemvQ8VNNI(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)

//go:noescape
func gemvQ8AVX2(w *byte, rb int, nb int, x *byte, dst *float32)

// useQ8AVX2 reports whether Q8_0 products use the AVX2 kernel (SIMD on,
// but no AVX-512 VNNI).
func useQ8AVX2() bool { return useSIMD() && hasAVX2 && !useQ8VNNI() }

// matmulQ8SIMD computes output columns [lo,hi) of a Q8_0 product from the
// quantized activations. With VNNI, each 16-row weight tile is packed
// once, then swept by all activation rows, eight at a time; a single
// activation row reads the Q8_0 rows directly instead. Without VNNI, the
// AVX2 kernel takes 8 rows for one activation row at a time.
func matmulQ8SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	switch {
	case useQ8VNNI():
		if n == 1 {
			matvecQ8VNNI(dst, act, w, rb, lo, hi)
		} else {
			matmulQ8VNNI(dst, act, n, w, rb, lo, hi)
		}
		return true
	case useQ8AVX2():
		matmulQ8AVX2(dst, act, n, w, rb, lo, hi)
		return true
	}
	return false
}

// paddedRows returns rows [r0, r0+rows) of w followed by zero rows up to
// tile rows in all, in a pooled buffer the caller returns to byteScratch.
func paddedRows(w *Matrix, rb, r0, rows, tile int) *[]byte {
	p := getBytes(tile * rb)
	clear(*p)
	copy(*p, w.Data[r0*rb:(r0+rows)*rb])
	return p
}

// matvecQ8VNNI is matmulQ8VNNI for one activation row, straight from the
// Q8_0 rows.
func matvecQ8VNNI(dst []float32, act []byte, w *Matrix, rb, lo, hi int) {
	nb := w.Cols / 32
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		pfd := 0
		if t0+2*q8TileRows <= w.Rows {
			pfd = q8TileRows * rb // prefetch the next tile
		}
		if rows < q8TileRows {
			pad := paddedRows(w, rb, t0, rows, q8TileRows)
			gemvQ8VNNI(&(*pad)[0], rb, nb, &act[0], &dst[t0], uint16(1)<<rows-1, 0)
			byteScratch.Put(pad)
			continue
		}
		gemvQ8VNNI(&w.Data[t0*rb], rb, nb, &act[0], &dst[t0], 0xffff, pfd)
	}
}

// matmulQ8VNNI packs each 16-row tile once and sweeps it with all n
// activation rows, eight, four, then one at a time.
func matmulQ8VNNI(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as := nb * q8ActBlock
	tp := getBytes(nb * q8PackBlock)
	defer byteScratch.Put(tp)
	tile := *tp
	// 3 and 7 rows run as 4 or 8 (the last row repeated) into a scratch
	// output: cheaper than the one-row kernel per leftover row.
	pn := q8PadRows(n)
	var out [8 * q8TileRows]float32
	if pn != n {
		pp := getBytes(pn * as)
		defer byteScratch.Put(pp)
		act = padActRows(*pp, act, n, pn, as)
	}
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		src := w.Data[t0*rb:]
		if rows < q8TileRows {
			// A partial tile: pack a zero-padded copy (zero scales);
			// the masked stores drop the padding lanes.
			pad := paddedRows(w, rb, t0, rows, q8TileRows)
			defer byteScratch.Put(pad)
			src = *pad
		}
		// Prefetch the next tile while packing this one (also across the
		// chunk end: another thread's rows then come from the shared L3).
		pfd := 0
		if t0+2*q8TileRows <= w.Rows {
			pfd = q8TileRows * rb
		}
		packQ8Tile(&tile[0], &src[0], rb, nb, pfd)
		mask := uint16(1)<<rows - 1
		if pn != n {
			// Direct calls: through a func value out would escape.
			if pn == 8 {
				gemmQ8x8(&act[0], as, &tile[0], nb, &out[0], q8TileRows, mask)
			} else {
				gemmQ8x4(&act[0], as, &tile[0], nb, &out[0], q8TileRows, mask)
			}
			for a := range n {
				copy(dst[a*R+t0:a*R+t0+rows], out[a*q8TileRows:a*q8TileRows+rows])
			}
			continue
		}
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

// q8AVX2Rows is the row count of the AVX2 kernel.
const q8AVX2Rows = 8

// matmulQ8AVX2 runs gemvQ8AVX2 over 8-row tiles, each tile (L1-resident
// after the first activation row) for every activation row in turn.
func matmulQ8AVX2(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/32
	as := nb * q8ActBlock
	var out [q8AVX2Rows]float32
	for t0 := lo; t0 < hi; t0 += q8AVX2Rows {
		rows := min(q8AVX2Rows, hi-t0)
		if rows < q8AVX2Rows {
			pad := paddedRows(w, rb, t0, rows, q8AVX2Rows)
			for a := 0; a < n; a++ {
				gemvQ8AVX2(&(*pad)[0], rb, nb, &act[a*as], &out[0])
				copy(dst[a*R+t0:a*R+t0+rows], out[:rows])
			}
			byteScratch.Put(pad)
			continue
		}
		for a := 0; a < n; a++ {
			gemvQ8AVX2(&w.Data[t0*rb], rb, nb, &act[a*as], &dst[a*R+t0])
		}
	}
}
