//go:build amd64 && !purego

package ml

//go:noescape
func attnScoresQ8AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ4AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnAccumQ8AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

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

func attnAccumQSIMD(k kvQuant, out, w []float32, kv []byte, offs []int) bool {
	if !useAVX512 {
		return false
	}
	f := attnAccumQ4AVX512
	if k.blockBytes == 34 {
		f = attnAccumQ8AVX512
	}
	f(&out[0], &w[0], &kv[0], &offs[0], len(w), len(out)/32)
	return true
}
