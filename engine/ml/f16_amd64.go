//go:build amd64 && !purego

package ml

import "unsafe"

//go:noescape
func cvtF32F16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func attnScoresF16AVX512(dst, q *float32, kv *uint16, offs *int, n, d int, scale float32)

//go:noescape
func attnAccumF16AVX512(out, w *float32, kv *uint16, offs *int, n, d int)

// attnScoresF16SIMD runs the fused AVX-512 kernel (f16 loads converted in
// registers) and reports true, or false when it is not available.
func attnScoresF16SIMD(dst, q []float32, kv []uint16, offs []int, scale float32) bool {
	if !useAVX512 {
		return false
	}
	n4 := len(dst) &^ 3
	if n4 > 0 {
		attnScoresF16x4AVX512(&dst[0], &q[0], &kv[0], &offs[0], n4, len(q), scale)
	}
	if n4 < len(dst) {
		attnScoresF16AVX512(&dst[n4], &q[0], &kv[0], &offs[n4], len(dst)-n4, len(q), scale)
	}
	return true
}

// attnScoresF16x4AVX512 is attnScoresF16AVX512 four positions at a time
// (n a multiple of 4), bit for bit (attnf16x4_amd64.s).
//
//go:noescape
func attnScoresF16x4AVX512(dst, q *float32, kv *uint16, offs *int, n, d int, scale float32)

func attnAccumF16SIMD(out, w []float32, kv []uint16, offs []int) bool {
	if !useAVX512 {
		return false
	}
	attnAccumF16AVX512(&out[0], &w[0], &kv[0], &offs[0], len(w), len(out))
	return true
}

//go:noescape
func cvtF16F32AVX2(dst *float32, src *uint16, n8 int)

//go:noescape
func cvtF32F16AVX2(dst *uint16, src *float32, n8 int)

func cvtF16F32(dst []float32, src []uint16) {
	switch {
	case useAVX512:
		dequantF16AVX512(&dst[0], (*byte)(unsafe.Pointer(&src[0])), len(dst))
		return
	case useAVX2:
		n8 := len(dst) &^ 7
		if n8 > 0 {
			cvtF16F32AVX2(&dst[0], &src[0], n8)
		}
		cvtF16F32Generic(dst[n8:], src[n8:])
		return
	}
	cvtF16F32Generic(dst, src)
}

func cvtF32F16(dst []uint16, src []float32) {
	switch {
	case useAVX512:
		cvtF32F16AVX512(&dst[0], &src[0], len(dst))
		return
	case useAVX2:
		n8 := len(dst) &^ 7
		if n8 > 0 {
			cvtF32F16AVX2(&dst[0], &src[0], n8)
		}
		cvtF32F16Generic(dst[n8:], src[n8:])
		return
	}
	cvtF32F16Generic(dst, src)
}
