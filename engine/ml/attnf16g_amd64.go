//go:build amd64 && !purego

package ml

// attnScoresF16G4AVX512 is attnScoresF16AVX512 for four heads at once
// (d a multiple of 32): head h's query at q[h*d:], its scores at
// dst[h*ds:]. Each key row is converted once for the four heads.
//
//go:noescape
func attnScoresF16G4AVX512(dst, q *float32, kv *uint16, offs *int, n, d, ds int, scale float32)

// attnAccumF16G4AVX512 is attnAccumF16AVX512 for four heads at once (d a
// multiple of 64): head h's output at out[h*d:], its weights at w[h*ws:].
// Each value row is converted once for the four heads.
//
//go:noescape
func attnAccumF16G4AVX512(out, w *float32, kv *uint16, offs *int, n, d, ws int)

// attnScoresF16GroupSIMD scores the heads it can four at a time and
// returns how many it did; the rest go head by head. The four-head kernel
// runs the one-head kernel's arithmetic only where that kernel has no
// tail (d a multiple of 32).
func attnScoresF16GroupSIMD(dst []float32, ds int, q []float32, g, d, n int, kv []uint16, offs []int, scale float32) int {
	if !useAVX512 || d%32 != 0 {
		return 0
	}
	h := 0
	for ; h+4 <= g; h += 4 {
		attnScoresF16G4AVX512(&dst[h*ds], &q[h*d], &kv[0], &offs[0], n, d, ds, scale)
	}
	return h
}

// attnAccumF16GroupSIMD is attnScoresF16GroupSIMD for the accumulation
// (d a multiple of 64, the one-head kernel's widest step).
func attnAccumF16GroupSIMD(out, w []float32, ws, g, d, n int, kv []uint16, offs []int) int {
	if !useAVX512 || d%64 != 0 {
		return 0
	}
	h := 0
	for ; h+4 <= g; h += 4 {
		attnAccumF16G4AVX512(&out[h*d], &w[h*ws], &kv[0], &offs[0], n, d, ws)
	}
	return h
}
