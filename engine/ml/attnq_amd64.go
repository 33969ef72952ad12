//go:build amd64 && !purego

package ml

//go:noescape
func attnScoresQ8AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ4AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

// attnScoresQSIMD runs the fused AVX-512 kernel when it applies; its
// results equal the tile path's at the same level (attnq_amd64.s).
func attnScoresQSIMD(k kvQuant, dst, q []float32, kv []byte, offs []int, scale float32) bool {
	if !useAVX512 {
		return false
	}
	f := attnScoresQ4AVX512
	if k.blockBytes == 34 {
		f = attnScoresQ8AVX512
	}
	f(&dst[0], &q[0], &kv[0], &offs[0], len(dst), len(q)/32, scale)
	return true
}

// attnAccumQSIMD runs the one-head accumulation kernel (attnqg_amd64.s)
// when it applies.
func attnAccumQSIMD(k kvQuant, out, w []float32, kv []byte, offs []int) bool {
	f := accumKernel(k, 1, len(out)/32)
	if f == nil {
		return false
	}
	f(&out[0], &w[0], &kv[0], &offs[0], len(w), len(out)/32)
	return true
}
