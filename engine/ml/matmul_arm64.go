//go:build arm64 && !purego

package ml

import (
	"encoding/binary"
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

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

//go:noescape
func dotF32NEON(a, b *float32, n16 int) float32

//go:noescape
func dotF16NEON(a *float32, b *uint16, n16 int) float32

//go:noescape
func axpyF32NEON(dst *float32, a float32, x *float32, n16 int)

// dot runs the NEON kernel over whole 16-value steps and adds the tail
// in Go.
func dot(a, b []float32) float32 {
	if !useSIMD() {
		return dotGeneric(a, b)
	}
	b = b[:len(a)]
	n16 := len(a) &^ 15
	var s float32
	if n16 > 0 {
		s = dotF32NEON(&a[0], &b[0], n16)
	}
	for i := n16; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// dotF16 is dot with b in f16: the same arithmetic on b's exact f32
// values, so an F16 product has the bits of the F32 one over its decoding.
func dotF16(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	n16 := len(a) &^ 15
	var s float32
	if n16 > 0 {
		s = dotF16NEON(&a[0], &b[0], n16)
	}
	for i := n16; i < len(a); i++ {
		s += a[i] * F16ToF32(b[i])
	}
	return s
}

// axpy is fused multiply-adds throughout, in the kernel and in Go's tail
// alike, so an element's result does not depend on where it falls.
func axpy(dst []float32, a float32, x []float32) {
	if !useSIMD() {
		axpyGeneric(dst, a, x)
		return
	}
	x = x[:len(dst)]
	n16 := len(dst) &^ 15
	if n16 > 0 {
		axpyF32NEON(&dst[0], a, &x[0], n16)
	}
	axpyGeneric(dst[n16:], a, x[n16:])
}

// matmulRowsSIMD computes output columns [lo,hi) of an F32 or F16
// product, each output one dot (or dotF16) of its activation row and
// weight row: the same arithmetic at any batch size, position and thread
// count. Each weight row stays in L1 while every activation row takes it.
func matmulRowsSIMD(dst, x []float32, n int, w *Matrix, rb, lo, hi int) bool {
	if !useSIMD() || w.Cols == 0 || (w.Type != F32 && w.Type != F16) {
		return false
	}
	R, K := w.Rows, w.Cols
	for r := lo; r < hi; r++ {
		raw := w.Data[r*rb : (r+1)*rb]
		if w.Type == F32 {
			row := BytesF32(raw)
			for i := 0; i < n; i++ {
				dst[i*R+r] = dot(x[i*K:(i+1)*K], row)
			}
			continue
		}
		row := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), K)
		for i := 0; i < n; i++ {
			dst[i*R+r] = dotF16(x[i*K:(i+1)*K], row)
		}
	}
	neonCalls.Add(int64(n * (hi - lo)))
	return true
}

//go:noescape
func quantQ8NEON(dst *byte, x *float32, nb int)

//go:noescape
func maxMinNEON(x *float32, n16 int) (hi, lo float32)

//go:noescape
func quantQ8KNEON(dst *byte, x *float32, iscale float32)

// quantizeActQ8 encodes one activation row (see quantizeActQ8Generic).
func quantizeActQ8(dst []byte, x []float32) {
	if useSIMD() && len(x) >= 32 {
		quantQ8NEON(&dst[0], &x[0], len(x)/32)
		return
	}
	quantizeActQ8Generic(dst, x)
}

// quantizeActQ8K encodes one activation row in Q8_K blocks (see
// quantizeActQ8KGeneric). The block's value of largest magnitude (the
// first one on a tie of +m and -m, NaNs ignored) comes from the largest
// and smallest values; only a tie takes a scan.
func quantizeActQ8K(dst []byte, x []float32) {
	if !useSIMD() {
		quantizeActQ8KGeneric(dst, x)
		return
	}
	for b := 0; b < len(x)/256; b++ {
		xb := x[b*256 : b*256+256]
		o := dst[b*q8KActBlock : (b+1)*q8KActBlock]
		hi, lo := maxMinNEON(&xb[0], 256)
		var mx float32
		switch {
		case hi > -lo:
			mx = hi
		case -lo > hi:
			mx = lo
		default: // a tie, or all NaN
			mx = hi
			for _, v := range xb {
				if v == hi || v == lo {
					mx = v
					break
				}
			}
		}
		if !(mx > 0 || mx < 0) { // zero, or nothing but NaNs
			clear(o)
			continue
		}
		iscale := -127 / mx
		quantQ8KNEON(&o[0], &xb[0], iscale)
		binary.LittleEndian.PutUint32(o[256:], math.Float32bits(1/iscale))
	}
}

//go:noescape
func siluMulNEON(gate, up *float32, n4 int)

// siluMul runs the NEON kernel (bit-identical to siluMulGeneric) over
// whole vectors and over a zero-padded copy of the tail.
func siluMul(gate, up []float32) {
	if !useSIMD() {
		siluMulGeneric(gate, up)
		return
	}
	up = up[:len(gate)]
	n4 := len(gate) &^ 3
	if n4 > 0 {
		siluMulNEON(&gate[0], &up[0], n4)
	}
	if n4 < len(gate) {
		var g, u [4]float32
		m := copy(g[:], gate[n4:])
		copy(u[:], up[n4:])
		siluMulNEON(&g[0], &u[0], 4)
		copy(gate[n4:], g[:m])
	}
}

func attnScores(dst, q, kv []float32, offs []int, scale float32) {
	if !useSIMD() {
		attnScoresGeneric(dst, q, kv, offs, scale)
		return
	}
	d := len(q)
	for t, o := range offs[:len(dst)] {
		dst[t] = dot(q, kv[o:o+d]) * scale
	}
}

func attnAccum(out, w, kv []float32, offs []int) {
	if !useSIMD() {
		attnAccumGeneric(out, w, kv, offs)
		return
	}
	d := len(out)
	for t, o := range offs[:len(w)] {
		axpy(out, w[t], kv[o:o+d])
	}
}

func expShift(x []float32, m float32) { expShiftGeneric(x, m) }
