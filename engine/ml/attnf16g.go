package ml

// Grouped f16 attention: the query heads that share one KV head (grouped-
// query attention) scored against, and accumulated from, that head's rows
// in one pass over them. In a long prefill every row's attention reads the
// whole cache of its sequence, once per query head before; reading each
// K or V row once for a group of heads (converted from f16 once, the keys
// streamed once from L2 or L3 instead of once per head) is where a deep
// prefill spends its time. Each head's results are AttnScoresF16's and
// AttnAccumF16's for that head alone, bit for bit: the grouped kernels run
// each head's operations in the same order, only interleaved.

// AttnScoresF16Group is AttnScoresF16 for g heads sharing the keys: q holds
// the heads' queries back to back (g*d values), dst their scores (g*n
// values, head h's at dst[h*n:(h+1)*n]). The offsets are checked once for
// all heads.
func AttnScoresF16Group(dst, q []float32, g int, kv []uint16, offs []int, scale float32) {
	d, n := checkGroup("AttnScoresF16Group", g, len(q), len(dst))
	checkAttnF16("AttnScoresF16Group", n, d, kv, offs)
	if n == 0 {
		return
	}
	h := 0
	if d > 0 {
		h = attnScoresF16GroupSIMD(dst, q, g, d, n, kv, offs[:n], scale)
	}
	for ; h < g; h++ {
		attnScoresF16(dst[h*n:(h+1)*n], q[h*d:(h+1)*d], kv, offs, scale)
	}
}

// AttnAccumF16Group is AttnAccumF16 for g heads sharing the values: out
// holds the heads' outputs back to back (g*d values), w their weights (g*n
// values, head h's at w[h*n:(h+1)*n]).
func AttnAccumF16Group(out, w []float32, g int, kv []uint16, offs []int) {
	d, n := checkGroup("AttnAccumF16Group", g, len(out), len(w))
	checkAttnF16("AttnAccumF16Group", n, d, kv, offs)
	if n == 0 || d == 0 {
		return
	}
	h := attnAccumF16GroupSIMD(out, w, g, d, n, kv, offs[:n])
	for ; h < g; h++ {
		attnAccumF16(out[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
	}
}
