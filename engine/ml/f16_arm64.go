//go:build arm64 && !purego

package ml

import "sync/atomic"

//go:noescape
func axpyF16NEON(dst *float32, a float32, x *uint16, n16 int)

// attnF16Calls counts the positions the arm64 f16 attention kernels
// scored or accumulated, so tests can tell they ran.
var attnF16Calls atomic.Int64

func cvtF16F32(dst []float32, src []uint16) { cvtF16F32Generic(dst, src) }
func cvtF32F16(dst []uint16, src []float32) { cvtF32F16Generic(dst, src) }

// attnScoresF16SIMD scores each position with dotF16 (the f16 row widened
// in registers): the bits of dot, and so of attnScores, on the converted
// rows, with no conversion tile.
func attnScoresF16SIMD(dst, q []float32, kv []uint16, offs []int, scale float32) bool {
	if !useSIMD() {
		return false
	}
	d := len(q)
	for t, o := range offs[:len(dst)] {
		dst[t] = dotF16(q, kv[o:o+d]) * scale
	}
	attnF16Calls.Add(int64(len(dst)))
	return true
}

// attnAccumF16SIMD accumulates each position with axpyF16NEON and the
// tail in Go on the converted values: axpy's arithmetic (fused throughout)
// on the converted rows.
func attnAccumF16SIMD(out, w []float32, kv []uint16, offs []int) bool {
	if !useSIMD() {
		return false
	}
	d := len(out)
	n16 := d &^ 15
	var tail [16]float32
	for t, o := range offs[:len(w)] {
		row := kv[o : o+d]
		if n16 > 0 {
			axpyF16NEON(&out[0], w[t], &row[0], n16)
		}
		if n16 < d {
			x := tail[:d-n16]
			cvtF16F32Generic(x, row[n16:])
			axpyGeneric(out[n16:], w[t], x)
		}
	}
	attnF16Calls.Add(int64(len(w)))
	return true
}
