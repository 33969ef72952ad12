//go:build amd64 && !purego

package ml

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

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

// setSIMD turns the best level on, or all SIMD off.
func setSIMD(on bool) {
	if !on {
		setSIMDLevel(levelGeneric)
		return
	}
	useAVX512, useAVX2 = hasAVX512, hasAVX2 && !hasAVX512
}

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

//go:noescape
func gemvQ8AVX2(x *float32, w *byte, rb int, nb int, dst *float32, nw int)

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
func gemvQ8(x *float32, w *byte, rb int, nb int, dst *float32, nw int)

//go:noescape
func gemvF16(x *float32, w *byte, ws int, k16 int, dst *float32, nw int)

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

// matmulRowsSIMD computes output columns [lo,hi) with the SIMD kernels.
func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool {
	R, K := w.Rows, w.Cols
	if n == 1 {
		n4 := lo + (hi-lo)&^3
		switch {
		case w.Type == F32:
			wf := BytesF32(w.Data)
			if n4 > lo {
				gemv(x, wf[lo*K:], K, K, dst[lo:], n4-lo)
			}
			for r := n4; r < hi; r++ {
				dst[r] = dot(x, wf[r*K:(r+1)*K])
			}
			return true
		case w.Type == Q8_0 && useAVX512:
			gemvQ8(&x[0], &w.Data[lo*rb], rb, K/32, &dst[lo], hi-lo)
			return true
		case w.Type == Q8_0:
			gemvQ8AVX2(&x[0], &w.Data[lo*rb], rb, K/32, &dst[lo], hi-lo)
			return true
		case w.Type == F16 && useAVX512 && K >= 16:
			k16 := K &^ 15
			if n4 > lo {
				gemvF16(&x[0], &w.Data[lo*rb], rb, k16, &dst[lo], n4-lo)
			}
			for r := lo; r < hi; r++ {
				row := w.Data[r*rb : (r+1)*rb]
				j0 := k16
				if r >= n4 {
					j0 = 0
					dst[r] = 0
				}
				var s float32
				for j := j0; j < K; j++ {
					s += x[j] * F16ToF32(binary.LittleEndian.Uint16(row[2*j:]))
				}
				dst[r] += s
			}
			return true
		}
		// Other types: decode each row, then one SIMD dot.
		buf := getScratch(K)
		for r := lo; r < hi; r++ {
			dequantRow(*buf, w.Type, w.Data[r*rb:(r+1)*rb])
			dst[r] = dot(x, *buf)
		}
		scratch.Put(buf)
		return true
	}

	// n > 1: a GEMM. Sweep all activation rows across a tile of weight
	// rows held as f32 (decoded once per tile for quantized types), four
	// activation rows by four weight rows per micro-kernel step.
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
		for r := nr4; r < nr; r++ {
			for i := 0; i < n; i++ {
				dst[i*R+t0+r] = dot(x[i*K:(i+1)*K], tile[r*K:(r+1)*K])
			}
		}
	}
	return true
}
