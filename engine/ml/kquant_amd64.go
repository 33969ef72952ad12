//go:build amd64 && !purego

package ml

// Four outputs per call: output k is the dot product of the weight row at
// w + k*ws with the activation row at a + k*as over nb super-blocks (see
// kquant_amd64.s).
//
//go:noescape
func kqQ4KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ40Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ5KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ6KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

// Eight Q4_0 weight rows against one activation row.
//
//go:noescape
func kqQ40Gemv8AVX2(w *byte, rb int, a *byte, nb int, out *float32)

// One weight row against four activation rows (ws ignored), for batches.
//
//go:noescape
func kqQ40Row4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ4KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ5KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ6KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

// Kernels for AVX-512 VNNI machines, for one activation row (as is
// ignored): Q4_K and Q6_K on 512-bit vectors, Q5_K with VPDPWSSD on
// 256-bit vectors. Batches (n >= 4) of the three go through the expanded
// tiles of gemmKTiles instead.
//
//go:noescape
func kqQ4KDot4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ6KDot4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqQ4KDot8VNNIZ and kqQ6KDot8VNNIZ are the four-row kernels for eight
// rows (out gets eight results), the activation loads shared by both
// groups of four.
//
//go:noescape
func kqQ4KDot8VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ6KDot8VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqQ4KDot8VNNIY is kqQ4KDot8VNNIZ on 256-bit vectors, each sub-block's
// scale a broadcast operand of its multiply-add and the scales decoded
// ahead of the rows (1.13x per core on the 8B shapes in L2, 1.08x from
// DRAM: BenchmarkMatVecCore). kqQ4KY selects it (a variable for that
// benchmark's A/B).
//
//go:noescape
func kqQ4KDot8VNNIY(w *byte, ws int, a *byte, as int, nb int, out *float32)

var kqQ4KY = true

// kqQ5KDot8VNNIY is kqQ4KDot8VNNIY for Q5_K (eight rows per call; before
// it Q5_K went four rows per kqQ5KDot4VNNI call, which decodes each row's
// scales with scalar code). kqQ5KY selects it, for the A/B.
//
//go:noescape
func kqQ5KDot8VNNIY(w *byte, ws int, a *byte, as int, nb int, out *float32)

var kqQ5KY = true

// Paths of a product of a few activation rows (2 to 7: a speculative
// verify step, the last token and its draft) for matmulKSIMD. Measured
// on a 38 MB Q4_K and a 55 MB Q6_K matrix (BenchmarkKQuantFewRows, one
// thread): the kernels' compute, not the weight reads, is the cost, so
// what pays is decoding each weight block once for several rows.
const (
	fewAuto    = iota // the measured best below
	fewOld            // one full pass per row below 4 rows, tiles from 4
	fewChunked        // one-row kernels over 64 KiB chunks of weight rows
	fewRow4           // rowTimes4: a weight row against 4 activation rows
	fewFused          // matmulKFew: each weight block decoded once for up to 4 rows
)

// kqFewPath forces a path, for BenchmarkKQuantFewRows.
var kqFewPath = fewAuto

// kqFewRowsChunk is the bytes of weight rows per chunk of fewChunked:
// small enough to stay in L2 while every activation row passes over it.
const kqFewRowsChunk = 64 << 10

// fewPath is the path of a product of n activation rows; eight says the
// type has eight-row VNNI kernels (Q4_K, Q6_K), the types measured: the
// others keep their paths from 4 rows. fused says it has few-row kernels
// (matmulKFew); forcing fewFused on a type without them means the choice.
func fewPath(n int, eight, fused bool) int {
	p := kqFewPath
	if p == fewFused && !fused {
		p = fewAuto
	}
	if p == fewAuto {
		switch {
		case fused && n > 1 && n < 8:
			// Q4_K, Q6_K with VNNI: 2 rows 1.3-1.5 one-row steps, 3:
			// 1.6-1.9, 4: 2.0-2.4, 5: 2.7-3.3 (see bench/RESULTS.md).
			p = fewFused
		case n > 1 && n < 4, n > 4 && n < 8 && eight:
			// 2 rows: 1.6-1.8 one-row steps against 2.0 for two passes; 3:
			// 2.2-2.4 against 3.0; 5: 3.7-4.2 against 4.3-5.0 for tiles.
			p = fewChunked
		case n == 4 && eight:
			// 1.9-2.5 against 2.7-4.1 for tiles (and 3.1-3.5 chunked).
			p = fewRow4
		default:
			p = fewOld
		}
	}
	if n == 1 || (n >= 4 && !eight) || (p == fewRow4 && n < 4) || (p == fewFused && n >= 8) {
		return fewOld
	}
	return p
}

// kqQ4K8 turns the eight-row matvec kernels on (a variable for
// BenchmarkKernel8Tune).
var kqQ4K8 = true

//go:noescape
func kqQ5KDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

// useKQAVX2 reports whether K-quant products use the AVX2 kernels (which
// also serve AVX-512 machines).
func useKQAVX2() bool { return useSIMD() && hasAVX2 }

// matmulKSIMD computes output columns [lo,hi) of a K-quant product from
// the quantized activations. One activation row takes four weight rows per
// kernel call; four or more take one weight row (L1-resident after the
// first call) against four activation rows per call, the leftover rows
// through a call over the window of the last four. Q4_K, Q5_K and Q6_K
// batches with VNNI go through expanded tiles instead (gemmKTiles).
func matmulKSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	if !useKQAVX2() {
		return false
	}
	var kern, row4 kqKernel
	bs, abs := 256, q8KActBlock // values per block, activation block bytes
	switch w.Type {
	case Q4_0:
		kern, bs, abs = kqQ40Dot4AVX2, 32, q8ActBlock
		row4 = kqQ40Row4AVX2
	case Q4_K:
		kern, row4 = kqQ4KDot4AVX2, kqQ4KRow4AVX2
	case Q5_K:
		kern, row4 = kqQ5KDot4AVX2, kqQ5KRow4AVX2
	case Q6_K:
		kern, row4 = kqQ6KDot4AVX2, kqQ6KRow4AVX2
	case Q2_K:
		kern, row4 = kqQ2KDot4AVX2, kqQ2KRow4AVX2
	case Q3_K:
		kern, row4 = kqQ3KDot4AVX2, kqQ3KRow4AVX2
	default:
		return false
	}
	// The bytes ahead matvecK prefetches per call; the 512-bit Q4_K and
	// Q6_K kernels prefetch inside their loop instead (kqPfDist).
	pf := kqPrefetchBytes
	zpf := 0
	if kqZCallPrefetch {
		zpf = pf
	}
	var kern8 kqKernel // eight rows per call, where there is such a kernel
	if useQ8VNNI() {
		switch w.Type {
		case Q4_K:
			kern, kern8, pf = kqQ4KDot4VNNIZ, kqQ4KDot8VNNIZ, zpf
			if kqQ4KY {
				kern8 = kqQ4KDot8VNNIY
			}
		case Q5_K:
			kern = kqQ5KDot4VNNI
			if kqQ5KY {
				kern8 = kqQ5KDot8VNNIY
			}
		case Q6_K:
			kern, kern8, pf = kqQ6KDot4VNNIZ, kqQ6KDot8VNNIZ, zpf
		case Q2_K:
			kern, row4 = kqQ2KDot4VNNI, kqQ2KRow4VNNI
		case Q3_K:
			kern, row4 = kqQ3KDot4VNNI, kqQ3KRow4VNNI
		}
	}
	R, nb := w.Rows, w.Cols/bs
	as := nb * abs
	// rowPass computes activation row i's outputs [l0,l1) with the
	// one-row kernels, prefetching ahead when pf > 0.
	rowPass := func(i, l0, l1, pf int) {
		d, a, l := dst[i*R:(i+1)*R], act[i*as:(i+1)*as], l0
		if w.Type == Q4_0 {
			for ; l+8 <= l1; l += 8 {
				kqQ40Gemv8AVX2(&w.Data[l*rb], rb, &a[0], nb, &d[l])
			}
		}
		if kern8 != nil && kqQ4K8 {
			for ; l+8 <= l1; l += 8 {
				kern8(&w.Data[l*rb], rb, &a[0], 0, nb, &d[l])
			}
		}
		matvecK(kern, pf, nb, d, a, w, rb, l, l1)
	}
	var fused *kqFew
	if useQ8VNNI() && w.Rows >= 4 {
		switch w.Type {
		case Q4_K:
			fused = &kqQ4KFew
		case Q6_K:
			fused = &kqQ6KFew
		}
	}
	// The few-row paths were measured with Q4_K's and Q6_K's eight-row
	// kernels; Q5_K keeps the paths it had before it had one.
	switch fewPath(n, kern8 != nil && w.Type != Q5_K, fused != nil) {
	case fewFused:
		matmulKFew(fused, dst, act, n, w, rb, lo, hi)
		return true
	case fewChunked:
		// Each chunk of weight rows is read from memory once, by the
		// first activation row, and from cache by the others.
		ch := max(8, kqFewRowsChunk/rb&^7)
		for c0 := lo; c0 < hi; c0 += ch {
			c1 := min(hi, c0+ch)
			for i := range n {
				if i == 0 {
					rowPass(i, c0, c1, pf)
				} else {
					rowPass(i, c0, c1, 0)
				}
			}
		}
		return true
	case fewRow4:
		rowTimes4(row4, dst, act, n, w, rb, as, nb, lo, hi)
		return true
	}
	if useQ8VNNI() && n >= 4 {
		switch w.Type {
		case Q4_K:
			gemmKTiles(expandQ4K, gemmQ4Kx8, gemmQ4Kx4, q4kTileBlock, dst, act, n, w, rb, lo, hi)
			return true
		case Q5_K:
			gemmKTiles(expandQ5K, gemmQ4Kx8, gemmQ4Kx4, q4kTileBlock, dst, act, n, w, rb, lo, hi)
			return true
		case Q6_K:
			gemmKTiles(expandQ6K, gemmQ6Kx8, gemmQ6Kx4, q6kTileBlock, dst, act, n, w, rb, lo, hi)
			return true
		}
	}
	if n < 4 {
		for i := range n {
			rowPass(i, lo, hi, pf)
		}
		return true
	}
	rowTimes4(row4, dst, act, n, w, rb, as, nb, lo, hi)
	return true
}

// rowTimes4 computes outputs [lo,hi) of n >= 4 activation rows one weight
// row at a time (L1-resident after the first call) against four
// activation rows per row4 call; the leftover rows go through the window
// of the last four, rewriting some outputs with the same bits.
func rowTimes4(row4 kqKernel, dst []float32, act []byte, n int, w *Matrix, rb, as, nb, lo, hi int) {
	R := w.Rows
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
}

type kqKernel func(w *byte, ws int, a *byte, as int, nb int, out *float32)

// matvecK computes dst[r] for r in [lo,hi) for one activation row, four
// weight rows per call, first asking for the rows about pf bytes ahead
// (none when pf is 0) with kqPrefetch.
func matvecK(kern kqKernel, pf, nb int, dst []float32, act []byte, w *Matrix, rb, lo, hi int) {
	r := lo
	ahead := 0
	if pf > 0 {
		ahead = max(4, (pf/rb+3)&^3)
	}
	for ; r+4 <= hi; r += 4 {
		if p := r + ahead; ahead > 0 && p+4 <= w.Rows {
			kqPrefetch(&w.Data[p*rb], 4*rb)
		}
		kern(&w.Data[r*rb], rb, &act[0], 0, nb, &dst[r])
	}
	if r == hi {
		return
	}
	var out [4]float32
	if w.Rows >= 4 {
		// The window of the last four rows (other rows are only read).
		base := max(0, hi-4)
		kern(&w.Data[base*rb], rb, &act[0], 0, nb, &out[0])
		copy(dst[r:hi], out[r-base:hi-base])
		return
	}
	for ; r < hi; r++ {
		kern(&w.Data[r*rb], 0, &act[0], 0, nb, &out[0])
		dst[r] = out[0]
	}
}

// Batched Q4_K, Q5_K and Q6_K with AVX-512 VNNI (q4kgemm_amd64.s,
// q6kgemm_amd64.s): each 16-row tile is expanded once (the values as
// unsigned bytes, the scales as ints, d and dmin as f32, the rows in the
// lanes) and then swept by eight or four activation rows per call, so the
// decoding is shared by all activation rows and each weight vector feeds
// eight multiply-adds.
//
//go:noescape
func expandQ4K(dst *byte, w *byte, rb int, nb int)

// Q5_K expands to the same tile, its values 0..31.
//
//go:noescape
func expandQ5K(dst *byte, w *byte, rb int, nb int)

//go:noescape
func gemmQ4Kx4(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmQ4Kx8(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func expandQ6K(dst *byte, w *byte, rb int, nb int)

//go:noescape
func gemmQ6Kx4(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

//go:noescape
func gemmQ6Kx8(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

// The size of one super-block of an expanded tile.
const (
	q4kTileBlock = 5248
	q6kTileBlock = 5696
)

type expandKKernel func(dst *byte, w *byte, rb int, nb int)

type gemmKKernel func(x *byte, xs int, w *byte, nb int, dst *float32, ds int, mask uint16)

// gemmKTiles computes output columns [lo,hi) of a K-quant product for
// n >= 4 activation rows over expanded 16-row tiles of tb bytes per
// super-block. A leftover of fewer than four activation rows goes through
// the window of the last four (rewriting some outputs with the same bits).
func gemmKTiles(expand expandKKernel, x8, x4 gemmKKernel, tb int, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/256
	as := nb * q8KActBlock
	tp := getBytes(nb * tb)
	defer byteScratch.Put(tp)
	tile := *tp
	for t0 := lo; t0 < hi; t0 += 16 {
		rows := min(16, hi-t0)
		mask := uint16(1)<<rows - 1
		if rows < 16 {
			// The expansion reads 16 rows: zeros after the last.
			pad := paddedRows(w, rb, t0, rows, 16)
			expand(&tile[0], &(*pad)[0], rb, nb)
			byteScratch.Put(pad)
		} else {
			expand(&tile[0], &w.Data[t0*rb], rb, nb)
		}
		a := 0
		for ; a+8 <= n; a += 8 {
			x8(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
		}
		if a+4 <= n {
			x4(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
			a += 4
		}
		if a < n {
			a = n - 4
			x4(&act[a*as], as, &tile[0], nb, &dst[a*R+t0], R, mask)
		}
	}
}

//go:noescape
func quantActQ8KAVX512(dst *byte, x *float32, nb int)

// quantizeActQ8K encodes one activation row in Q8_K blocks (see
// quantizeActQ8KGeneric).
func quantizeActQ8K(dst []byte, x []float32) {
	if useAVX512 && len(x) >= 256 {
		quantActQ8KAVX512(&dst[0], &x[0], len(x)/256)
		return
	}
	quantizeActQ8KGeneric(dst, x)
}
