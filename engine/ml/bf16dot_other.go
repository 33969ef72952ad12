//go:build (!amd64 && !arm64) || purego

package ml

// quantizeActBF16 rounds an activation row to bf16 (roundBF16).
func quantizeActBF16(dst []byte, x []float32) { quantizeActBF16Generic(dst, x) }

// matmulBF16SIMD: BF16 products take matmulBF16Generic here.
func matmulBF16SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	return false
}
