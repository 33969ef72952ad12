//go:build amd64 && !purego

package ml

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

// useAVX512 selects the AVX-512 kernels. Tests and benchmarks clear it to
// run the plain-Go reference; the purego build tag removes the assembly.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ

//go:noescape
func gemmF32x4(x *float32, xs int, w *float32, ws int, k int, dst *float32, ds int, nw int)

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

// matmulRowsSIMD computes output columns [lo,hi) with the AVX-512 kernels.
// It reports false for cases it leaves to the generic path.
func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool {
	R, K := w.Rows, w.Cols
	if n == 1 {
		n4 := lo + (hi-lo)&^3
		switch w.Type {
		case F32:
			wf := BytesF32(w.Data)
			if n4 > lo {
				gemvF32(&x[0], &wf[lo*K], K, K, &dst[lo], n4-lo)
			}
			for r := n4; r < hi; r++ {
				dst[r] = dotAVX512(&x[0], &wf[r*K], K)
			}
			return true
		case Q8_0:
			gemvQ8(&x[0], &w.Data[lo*rb], rb, K/32, &dst[lo], hi-lo)
			return true
		case F16:
			k16 := K &^ 15
			if n4 > lo && k16 > 0 {
				gemvF16(&x[0], &w.Data[lo*rb], rb, k16, &dst[lo], n4-lo)
			} else {
				n4 = lo
				k16 = 0
			}
			for r := lo; r < hi; r++ {
				row := w.Data[r*rb : (r+1)*rb]
				var s float32
				j0 := k16
				if r >= n4 {
					j0 = 0
				}
				for j := j0; j < K; j++ {
					s += x[j] * F16ToF32(binary.LittleEndian.Uint16(row[2*j:]))
				}
				if r >= n4 {
					dst[r] = s
				} else {
					dst[r] += s
				}
			}
			return true
		}
		// Other types: decode each row, then one SIMD dot.
		buf := getScratch(K)
		for r := lo; r < hi; r++ {
			dequantRow(*buf, w.Type, w.Data[r*rb:(r+1)*rb])
			dst[r] = dotAVX512(&x[0], &(*buf)[0], K)
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
		i := 0
		if nr4 > 0 {
			for ; i+4 <= n; i += 4 {
				gemmF32x4(&x[i*K], K, &tile[0], K, K, &dst[i*R+t0], R, nr4)
			}
			for ; i < n; i++ {
				gemvF32(&x[i*K], &tile[0], K, K, &dst[i*R+t0], nr4)
			}
		}
		for r := nr4; r < nr; r++ {
			for i := 0; i < n; i++ {
				dst[i*R+t0+r] = dotAVX512(&x[i*K], &tile[r*K], K)
			}
		}
	}
	return true
}

func useSIMD() bool               { return useAVX512 }
func setSIMD(on bool)             { useAVX512 = on && hasAVX512 }
func sumSIMD(p []float32) float32 { return sumAVX512(&p[0], len(p)) }

var hasAVX512 = useAVX512
