package ml

import "fmt"

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
	_, n := checkGroup("AttnScoresF16Group", g, len(q), len(dst))
	checkOffs("AttnScoresF16Group", n, offs)
	AttnScoresF16Strided(dst, n, q, g, kv, offs[:n], scale)
}

// AttnScoresF16Strided is AttnScoresF16Group over the len(offs) positions
// with head h's scores at dst[h*ds:h*ds+len(offs)]: a tile of positions
// written into each head's row of a wider score matrix. A score does not
// depend on the other positions, so scoring a span tile by tile gives
// every score the bits of scoring it whole.
func AttnScoresF16Strided(dst []float32, ds int, q []float32, g int, kv []uint16, offs []int, scale float32) {
	d, _ := checkGroup("AttnScoresF16Strided", g, len(q), 0)
	n := len(offs)
	checkStrided("AttnScoresF16Strided", g, n, ds, len(dst))
	checkAttnF16("AttnScoresF16Strided", n, d, kv, offs)
	if n == 0 {
		return
	}
	h := 0
	if d > 0 {
		h = attnScoresF16GroupSIMD(dst, ds, q, g, d, n, kv, offs, scale)
	}
	for ; h < g; h++ {
		attnScoresF16(dst[h*ds:h*ds+n], q[h*d:(h+1)*d], kv, offs, scale)
	}
}

// AttnAccumF16Group is AttnAccumF16 for g heads sharing the values: out
// holds the heads' outputs back to back (g*d values), w their weights (g*n
// values, head h's at w[h*n:(h+1)*n]).
func AttnAccumF16Group(out, w []float32, g int, kv []uint16, offs []int) {
	_, n := checkGroup("AttnAccumF16Group", g, len(out), len(w))
	checkOffs("AttnAccumF16Group", n, offs)
	AttnAccumF16Strided(out, w, n, g, kv, offs[:n])
}

// AttnAccumF16Strided is AttnAccumF16Group over the len(offs) positions
// with head h's weights at w[h*ws:h*ws+len(offs)]. Each output element is
// one chain of additions over the positions in order, kept in out between
// calls, so accumulating a span tile by tile, in order, gives the bits of
// accumulating it whole.
func AttnAccumF16Strided(out, w []float32, ws, g int, kv []uint16, offs []int) {
	d, _ := checkGroup("AttnAccumF16Strided", g, len(out), 0)
	n := len(offs)
	checkStrided("AttnAccumF16Strided", g, n, ws, len(w))
	checkAttnF16("AttnAccumF16Strided", n, d, kv, offs)
	if n == 0 || d == 0 {
		return
	}
	h := attnAccumF16GroupSIMD(out, w, ws, g, d, n, kv, offs)
	for ; h < g; h++ {
		attnAccumF16(out[h*d:(h+1)*d], w[h*ws:h*ws+n], kv, offs)
	}
}

func checkStrided(op string, g, n, stride, size int) {
	if stride < n || (n > 0 && size < (g-1)*stride+n) {
		panic(fmt.Sprintf("ml: %s of %d heads by %d positions with stride %d over %d values", op, g, n, stride, size))
	}
}

func checkOffs(op string, n int, offs []int) {
	if len(offs) < n {
		panic(fmt.Sprintf("ml: %s with %d positions and %d offsets", op, n, len(offs)))
	}
}
