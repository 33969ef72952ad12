//go:build amd64 && !purego

package ml

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Q4_1, Q5_1 and IQ4_XS kernels. Each reproduces its type's reference
// arithmetic (dot32 with the offset term, dotK; qdot.go) bit for bit.
//
//	             AVX2                                 AVX-512 VNNI
//	Q4_1, Q5_1   n any: 8-row gemv (gemvQ41AVX2),     n < 4: 16-row gemv reading the rows
//	             rows left over: 4-output kernels     in place (gemvQ41VNNI); n >= 4: tiles
//	             (kqQ41Dot4AVX2)                      expanded to Q8_0 blocks, packed, and
//	                                                  swept 8 or 4 activation rows at a
//	                                                  time (gemmOffx8/x4)
//	IQ4_XS       n < 4: 4 rows per call (Dot4);       n < 4: Dot4 on ZMM (with VBMI on the
//	             n >= 4: 1 row x 4 activations (Row4) activation arranged once per row,
//	                                                  kqIQ4XSDot4VNNIA); n >= 4: packed
//	                                                  tiles as Q4_1 (gemmIQ4XSx8/x4)
//
// Q4_1 and Q5_1 carry a per-block offset m (value = d*q + m) that the Q8_0
// kernels have no place for, so their kernels add float32(sum(q))*(m*dx)
// after each block's product. IQ4_XS is Q4_K's structure with the IQ4_NL
// code book.

//go:noescape
func kqQ41Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ51Dot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqIQ4XSDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqIQ4XSDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqIQ4XSDot4VNNIZ is kqIQ4XSDot4VNNI for one activation row (as is
// ignored), a sub-block per 128-bit lane and the activation arranged once
// per super-block for the four rows.
//
//go:noescape
func kqIQ4XSDot4VNNIZ(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqIQ4XSDot4VNNIM is kqIQ4XSDot4VNNIZ with the scales decoded straight
// into their lanes (VPMULTISHIFTQB) and the activation scale loaded once.
//
//go:noescape
func kqIQ4XSDot4VNNIM(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqIQ4XSDot4VNNIA is kqIQ4XSDot4VNNIM reading an activation row that
// iqxArrangeAct arranged once (nb blocks of iqxArrBlock bytes at dst).
//
//go:noescape
func kqIQ4XSDot4VNNIA(w *byte, ws int, a *byte, as int, nb int, out *float32)

// kqIQ4XSDot8VNNIA is kqIQ4XSDot4VNNIA on eight rows per call.
//
//go:noescape
func kqIQ4XSDot8VNNIA(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func iqxArrangeAct(dst *byte, a *byte, nb int)

// iqx8 selects kqIQ4XSDot8VNNIA for the groups of eight rows (a variable
// for the benchmarks).
var iqx8 = true

// iqxArrBlock is the size of an arranged activation block (IQXA_BLOCK).
const iqxArrBlock = 448

// iqxZ selects kqIQ4XSDot4VNNIZ over kqIQ4XSDot4VNNI, iqxM
// kqIQ4XSDot4VNNIM over both, iqxA kqIQ4XSDot4VNNIA (with its arranged
// activation) over all three: variables for BenchmarkMatVecCore's A/B.
var iqxZ, iqxM, iqxA = true, true, true

// hasVBMI: VPMULTISHIFTQB and VPERMB are AVX512_VBMI, which some VNNI
// CPUs lack (Cascade Lake, Cooper Lake); the kernels that use them are
// listed in TestVBMIKernelsListed and dispatched only with useVBMI.
var hasVBMI = hasVNNI && cpu.X86.HasAVX512VBMI

func useVBMI() bool { return useQ8VNNI() && hasVBMI }

// One weight row against four activation rows (ws ignored), the values
// decoded once for the four.
//
//go:noescape
func kqIQ4XSRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

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
			kern = kqIQ4XSDot4VNNI
			if iqxZ {
				kern = kqIQ4XSDot4VNNIZ
			}
			if iqxM && useVBMI() {
				kern = kqIQ4XSDot4VNNIM
			}
		}
	default:
		return false
	}
	R, nb := w.Rows, w.Cols/bs
	as := nb * abs
	if w.Type == IQ4_XS && useQ8VNNI() && n >= 4 {
		gemmPackedVNNI(expandIQ4XS, gemmIQ4XSx8, gemmIQ4XSx4, 256, q8KActBlock, dst, act, n, w, rb, lo, hi)
		return true
	}
	if gemv != nil && useQ8VNNI() {
		if n < 4 {
			for i := 0; i < n; i++ {
				matvec16VNNI(gemv, dst[i*R:], act[i*as:], w, rb, lo, hi)
			}
			return true
		}
		gemmPackedVNNI(expand, gemmOffx8, gemmOffx4, 32, q8ActBlock, dst, act, n, w, rb, lo, hi)
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
	if w.Type == IQ4_XS && n < 4 && nb > 0 && iqxA && useVBMI() {
		// The activation arranged once per row for every weight row (its
		// blocks 64-byte aligned, as the kernel's loads are 64 bytes).
		p := getBytes(nb*iqxArrBlock + 64)
		defer byteScratch.Put(p)
		buf := *p
		buf = buf[(64-int(uintptr(unsafe.Pointer(&buf[0]))&63))&63:]
		// The kernel prefetches inside its loop (kqPfDist, kqPfRows).
		pf := 0
		if kqZCallPrefetch {
			pf = kqPrefetchBytes
		}
		for i := 0; i < n; i++ {
			iqxArrangeAct(&buf[0], &act[i*as], nb)
			d, l := dst[i*R:(i+1)*R], lo
			if iqx8 {
				for ; l+8 <= hi; l += 8 {
					kqIQ4XSDot8VNNIA(&w.Data[l*rb], rb, &buf[0], 0, nb, &d[l])
				}
			}
			matvecK(kqIQ4XSDot4VNNIA, pf, nb, d, buf, w, rb, l, hi)
		}
		return true
	}
	if n < 4 {
		for i := 0; i < n; i++ {
			matvecK(kern, kqPrefetchBytes, nb, dst[i*R:(i+1)*R], act[i*as:(i+1)*as], w, rb, lo, hi)
		}
		return true
	}
	// One weight row (L1-resident after the first call) against four
	// activation rows per call (ws = 0); the leftover rows through the
	// window of the last four.
	if row4 == nil {
		row4 = kern // with ws = 0 a four-output kernel is a Row4 kernel
	}
	rowTimes4(row4, dst, act, n, w, rb, as, nb, lo, hi)
	return true
}

type expandOffKernel func(dst *byte, w *byte, rb int, rows int, nb int, m *byte)

type packedGemm func(x *byte, xs int, w *byte, m *byte, nb int, dst *float32, ds int, mask uint16)

// gemmPackedVNNI expands each 16-row tile into Q8_0 blocks (sub per
// weight block of bs values) plus one f16 per row and weight block (m for
// Q4_1/Q5_1, d for IQ4_XS), packs it once with packQ8Tile, then sweeps it
// with eight or four activation rows (abs bytes per activation block) per
// call; a leftover of fewer than four goes through the window of the last
// four (rewriting some outputs with the same bits). n must be at least 4.
func gemmPackedVNNI(expand expandOffKernel, x8, x4 packedGemm, bs, abs int, dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/bs
	sub := bs / 32
	as, qrb := nb*abs, nb*sub*q8BlockBytes
	ep := getBytes(q8TileRows * qrb)
	defer byteScratch.Put(ep)
	tp := getBytes(nb * sub * q8PackBlock)
	defer byteScratch.Put(tp)
	mp := getBytes(nb * 2 * q8TileRows)
	defer byteScratch.Put(mp)
	exp, tile, ms := *ep, *tp, *mp
	for t0 := lo; t0 < hi; t0 += q8TileRows {
		rows := min(q8TileRows, hi-t0)
		if rows < q8TileRows {
			// Zeros in the padding rows (their lanes are not stored).
			clear(exp[rows*qrb:])
			clear(ms)
		}
		expand(&exp[0], &w.Data[t0*rb], rb, rows, nb, &ms[0])
		packQ8Tile(&tile[0], &exp[0], qrb, nb*sub, 0)
		mask := uint16(1)<<rows - 1
		a := 0
		for ; a+8 <= n; a += 8 {
			x8(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
		}
		if a+4 <= n {
			x4(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
			a += 4
		}
		if a < n {
			a = n - 4
			x4(&act[a*as], as, &tile[0], &ms[0], nb, &dst[a*R+t0], R, mask)
		}
	}
}
