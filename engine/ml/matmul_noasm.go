//go:build (!amd64 && !arm64) || purego

package ml

const useAVX512 = false

func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool { return false }

func dot(a, b []float32) float32                 { return dotGeneric(a, b) }
func axpy(dst []float32, a float32, x []float32) { axpyGeneric(dst, a, x) }

func dequantQ8AVX512(dst *float32, src *byte, nb int) { panic("unreachable") }
func dequantF16AVX512(dst *float32, src *byte, n int) { panic("unreachable") }

// SIMD levels, for tests and benchmarks: only the generic one here.
const (
	levelGeneric = iota
	levelAVX2
	levelAVX512
)

func simdLevel() int              { return levelGeneric }
func setSIMDLevel(int)            {}
func supportedLevels() []int      { return []int{levelGeneric} }
func sumSIMD(p []float32) float32 { panic("unreachable") }
func useSIMD() bool               { return false }
func setSIMD(bool)                {}

func quantizeActQ8(dst []byte, x []float32) { quantizeActQ8Generic(dst, x) }

func quantizeActQ8K(dst []byte, x []float32) { quantizeActQ8KGeneric(dst, x) }

func matmulQ8SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool { return false }

func siluMul(gate, up []float32) { siluMulGeneric(gate, up) }

func attnScores(dst, q, kv []float32, offs []int, scale float32) {
	attnScoresGeneric(dst, q, kv, offs, scale)
}

func attnAccum(out, w, kv []float32, offs []int) { attnAccumGeneric(out, w, kv, offs) }

func expShift(x []float32, m float32) { expShiftGeneric(x, m) }

func matmulKSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool { return false }

func matmulExpandSIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool {
	return false
}
