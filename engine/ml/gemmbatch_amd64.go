//go:build amd64 && !purego

package ml

import "fmt"

//go:noescape
func gemmBcast12x32(a *float32, as int, p *float32, k int, dst *float32, ds int)

//go:noescape
func gemmBcast12x16(a *float32, as int, p *float32, k int, dst *float32, ds int)

// bcastGEMM runs MatMulBatch's broadcast GEMM when the CPU and the weight
// type allow it, reporting whether it did.
func bcastGEMM(dst, x []float32, n int, w *Matrix) bool {
	if !useAVX512 || w.Type != F32 && w.Type != F16 {
		return false
	}
	rb, err := w.Type.RowBytes(w.Cols)
	if err != nil || len(w.Data) != w.Rows*rb {
		panic(fmt.Sprintf("ml: MatMulBatch with %v %dx%d (%d bytes)", w.Type, w.Rows, w.Cols, len(w.Data)))
	}
	bcastSplit(dst, x, n, w, rb, bcastKernels{gemmBcast12x32, gemmBcast12x16})
	return true
}
