//go:build (!amd64 && !arm64) || purego

package ml

func matmulMXFP4SIMD(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) bool { return false }
