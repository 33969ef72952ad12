//go:build (!amd64 && !arm64) || purego

package ml

func cvtF16F32(dst []float32, src []uint16) { cvtF16F32Generic(dst, src) }
func cvtF32F16(dst []uint16, src []float32) { cvtF32F16Generic(dst, src) }

func attnScoresF16SIMD(dst, q []float32, kv []uint16, offs []int, scale float32) bool { return false }
func attnAccumF16SIMD(out, w []float32, kv []uint16, offs []int) bool                 { return false }
