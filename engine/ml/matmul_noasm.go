//go:build !amd64 || purego

package ml

const useAVX512 = false

func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool { return false }

func dotAVX512(a, b *float32, n int) float32                { panic("unreachable") }
func axpyAVX512(dst *float32, a float32, x *float32, n int) { panic("unreachable") }
func dequantQ8AVX512(dst *float32, src *byte, nb int)       { panic("unreachable") }
func dequantF16AVX512(dst *float32, src *byte, n int)       { panic("unreachable") }

func useSIMD() bool               { return false }
func setSIMD(bool)                {}
func sumSIMD(p []float32) float32 { panic("unreachable") }
