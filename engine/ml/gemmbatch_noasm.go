//go:build !amd64 || purego

package ml

// bcastGEMM: no broadcast kernel here; MatMulBatch is MatMul.
func bcastGEMM(dst, x []float32, n int, w *Matrix) bool { return false }
