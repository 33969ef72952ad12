//go:build amd64 && !purego

package ml

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
func attnAccumQ8x1p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x1p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x1p4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x2p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x2p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x2p4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x4p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x4p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ8x8p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x1p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x1p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x1p4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x2p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x2p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x2p4AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x4p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x4p2AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

//go:noescape
func attnAccumQ4x8p1AVX512(out, w *float32, kv *byte, offs *int, n, nb int)

type qScoresKernel = func(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
type qAccumKernel = func(out, w *float32, kv *byte, offs *int, n, nb int)

// accumKernels are the generated accumulation kernels by (8 for Q8_0 or
// 4 for Q4_0, heads, blocks per pass).
var accumKernels = map[[3]int]qAccumKernel{
	{8, 1, 1}: attnAccumQ8x1p1AVX512,
	{8, 1, 2}: attnAccumQ8x1p2AVX512,
	{8, 1, 4}: attnAccumQ8x1p4AVX512,
	{8, 2, 1}: attnAccumQ8x2p1AVX512,
	{8, 2, 2}: attnAccumQ8x2p2AVX512,
	{8, 2, 4}: attnAccumQ8x2p4AVX512,
	{8, 4, 1}: attnAccumQ8x4p1AVX512,
	{8, 4, 2}: attnAccumQ8x4p2AVX512,
	{8, 8, 1}: attnAccumQ8x8p1AVX512,
	{4, 1, 1}: attnAccumQ4x1p1AVX512,
	{4, 1, 2}: attnAccumQ4x1p2AVX512,
	{4, 1, 4}: attnAccumQ4x1p4AVX512,
	{4, 2, 1}: attnAccumQ4x2p1AVX512,
	{4, 2, 2}: attnAccumQ4x2p2AVX512,
	{4, 2, 4}: attnAccumQ4x2p4AVX512,
	{4, 4, 1}: attnAccumQ4x4p1AVX512,
	{4, 4, 2}: attnAccumQ4x4p2AVX512,
	{4, 8, 1}: attnAccumQ4x8p1AVX512,
}

// accumKernel returns the accumulation kernel for g heads (1, 2, 4 or 8)
// of k's type over rows of nb blocks: the one that takes the most blocks
// per pass over the rows (so each row's cache lines are read once), or nil
// without AVX-512.
func accumKernel(k kvQuant, g, nb int) qAccumKernel {
	if !useAVX512 {
		return nil
	}
	q := 4
	if k.blockBytes == 34 {
		q = 8
	}
	for _, p := range []int{4, 2, 1} {
		if f, ok := accumKernels[[3]int{q, g, p}]; ok && nb%p == 0 {
			return f
		}
	}
	return nil
}

// groupKernel returns the grouped scores kernel for gc heads (2, 4 or 8)
// of k's type, or nil without AVX-512.
func groupKernel(k kvQuant, gc int) qScoresKernel {
	if !useAVX512 {
		return nil
	}
	q8 := k.blockBytes == 34
	switch {
	case gc == 8 && q8:
		return attnScoresQ8x8AVX512
	case gc == 8:
		return attnScoresQ4x8AVX512
	case gc == 4 && q8:
		return attnScoresQ8x4AVX512
	case gc == 4:
		return attnScoresQ4x4AVX512
	case gc == 2 && q8:
		return attnScoresQ8x2AVX512
	case gc == 2:
		return attnScoresQ4x2AVX512
	}
	return nil
}
