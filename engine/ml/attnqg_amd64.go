//go:build amd64 && !purego

package ml

//go:generate python3 internal/gen/attnqg/gen.py attnqg_amd64.s

//go:noescape
func attnScoresQ8x2AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ4x2AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ8x4AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ4x4AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ8x8AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnScoresQ4x8AVX512(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)

//go:noescape
func attnAccumQ8x2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x8AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x8AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

type qScoresKernel = func(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
type qAccumKernel = func(out, w *float32, kv *byte, offs *int, n, nb int)

// groupKernels returns the grouped kernels for gc heads (2, 4 or 8) of
// k's type, or nil without AVX-512.
func groupKernels(k kvQuant, gc int) (qScoresKernel, qAccumKernel) {
	if !useAVX512 {
		return nil, nil
	}
	q8 := k.blockBytes == 34
	switch {
	case gc == 8 && q8:
		return attnScoresQ8x8AVX512, attnAccumQ8x8AVX512
	case gc == 8:
		return attnScoresQ4x8AVX512, attnAccumQ4x8AVX512
	case gc == 4 && q8:
		return attnScoresQ8x4AVX512, attnAccumQ8x4AVX512
	case gc == 4:
		return attnScoresQ4x4AVX512, attnAccumQ4x4AVX512
	case gc == 2 && q8:
		return attnScoresQ8x2AVX512, attnAccumQ8x2AVX512
	case gc == 2:
		return attnScoresQ4x2AVX512, attnAccumQ4x2AVX512
	}
	return nil, nil
}
