//go:build amd64 && !purego

package ml

import "unsafe"

//go:noescape
func cvtF32F16AVX512(dst *uint16, src *float32, n int)

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

//go:noescape
func cvtF16RowsAVX512(dst *float32, kv *uint16, offs *int, m int, d16 int)

// cvtF16Rows converts the rows of d values at kv[offs[j]:] to consecutive
// float32 rows of dst, exactly.
func cvtF16Rows(dst []float32, kv []uint16, offs []int, d int) {
	if useAVX512 && d%16 == 0 && len(offs) > 0 {
		cvtF16RowsAVX512(&dst[0], &kv[0], &offs[0], len(offs), d/16)
		return
	}
	for j, o := range offs {
		cvtF16F32(dst[j*d:(j+1)*d], kv[o:o+d])
	}
}
