//go:build arm64 && !purego

package ml

// bf16LanesNEON: the 16 lanes of dotBF16Ref over the first nc whole
// 32-value chunks of x and each of nw weight rows (ws bytes apart), stored
// at lanes+64*row (see neongen's bf16Lanes).
//
//go:noescape
func bf16LanesNEON(x *byte, w *byte, ws int, nc int, lanes *float32, nw int)

// quantizeActBF16 rounds an activation row to bf16 (roundBF16).
func quantizeActBF16(dst []byte, x []float32) { quantizeActBF16Generic(dst, x) }

// matmulBF16SIMD runs a BF16 product's whole chunks in NEON
// (bf16LanesNEON, the same bits as dotBF16Ref) at any SIMD level.
func matmulBF16SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	if w.Cols == 0 || !useSIMD() {
		return false
	}
	matmulBF16Lanes(dst, act, n, w, rb, lo, hi, bf16LanesNEON)
	return true
}
