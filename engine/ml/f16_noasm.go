//go:build !amd64 || purego

package ml

func cvtF16F32(dst []float32, src []uint16) { cvtF16F32Generic(dst, src) }
func cvtF32F16(dst []uint16, src []float32) { cvtF32F16Generic(dst, src) }

func cvtF16Rows(dst []float32, kv []uint16, offs []int, d int) {
	for j, o := range offs {
		cvtF16F32(dst[j*d:(j+1)*d], kv[o:o+d])
	}
}
