//go:build arm64 && !purego

package ml

import "golang.org/x/sys/cpu"

// The arm64 kernel levels: plain NEON (every ARMv8-A core; Go's arm64 port
// requires it) and NEON with the dot-product instructions (SDOT, FEAT_DotProd:
// Cortex-A76/Neoverse N1 and later, Apple M1 and later, Graviton2 and
// later). They take the slots of amd64's AVX2 and AVX-512 so that the
// tests' and benchmarks' level tables index the same way. The purego
// build tag removes the assembly altogether.
const (
	levelGeneric = iota
	levelNEON
	levelDotProd

	levelAVX2   = levelNEON
	levelAVX512 = levelDotProd
)

// useAVX512 gates amd64-only paths of shared code (dequant.go).
const useAVX512 = false

var (
	hasDotProd = cpu.ARM64.HasASIMDDP
	level      = bestLevel()
)

func bestLevel() int {
	if hasDotProd {
		return levelDotProd
	}
	return levelNEON
}

func simdLevel() int { return level }

// setSIMDLevel selects a kernel level; a level the CPU lacks falls back to
// generic.
func setSIMDLevel(l int) {
	switch {
	case l == levelNEON, l == levelDotProd && hasDotProd:
		level = l
	default:
		level = levelGeneric
	}
}

func supportedLevels() []int {
	l := []int{levelGeneric, levelNEON}
	if hasDotProd {
		l = append(l, levelDotProd)
	}
	return l
}

func useSIMD() bool { return level != levelGeneric }

// setSIMD turns the best level on, or all SIMD off.
func setSIMD(on bool) {
	if on {
		level = bestLevel()
	} else {
		level = levelGeneric
	}
}

func sumSIMD(p []float32) float32 {
	var s float32
	for _, v := range p {
		s += v
	}
	return s
}

func dequantQ8AVX512(dst *float32, src *byte, nb int) { panic("unreachable") }
func dequantF16AVX512(dst *float32, src *byte, n int) { panic("unreachable") }

func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool { return false }

func dot(a, b []float32) float32                 { return dotGeneric(a, b) }
func axpy(dst []float32, a float32, x []float32) { axpyGeneric(dst, a, x) }

func quantizeActQ8(dst []byte, x []float32) { quantizeActQ8Generic(dst, x) }

func quantizeActQ8K(dst []byte, x []float32) { quantizeActQ8KGeneric(dst, x) }

func siluMul(gate, up []float32) { siluMulGeneric(gate, up) }

func attnScores(dst, q, kv []float32, offs []int, scale float32) {
	attnScoresGeneric(dst, q, kv, offs, scale)
}

func attnAccum(out, w, kv []float32, offs []int) { attnAccumGeneric(out, w, kv, offs) }

func expShift(x []float32, m float32) { expShiftGeneric(x, m) }
