package ml

import "fmt"

// AttnScores sets dst[t] = dot(q, kv[offs[t]:offs[t]+len(q)]) * scale for
// every t < len(dst): one query head against the keys of all positions of
// a sequence, wherever its KV pages put them. Each score is computed the
// same way whatever len(dst) is, so a row's attention does not depend on
// how the batch around it was formed.
func AttnScores(dst, q, kv []float32, offs []int, scale float32) {
	checkAttn("AttnScores", len(dst), len(q), kv, offs)
	if len(dst) == 0 {
		return
	}
	if len(q) == 0 {
		clear(dst)
		return
	}
	attnScores(dst, q, kv, offs[:len(dst)], scale)
}

// AttnAccum adds w[t] * kv[offs[t]:offs[t]+len(out)] to out for t = 0, 1,
// ..., len(w)-1 in that order: the value half of attention for one head.
func AttnAccum(out, w, kv []float32, offs []int) {
	checkAttn("AttnAccum", len(w), len(out), kv, offs)
	if len(w) == 0 || len(out) == 0 {
		return
	}
	attnAccum(out, w, kv, offs[:len(w)])
}

func checkAttn(op string, n, d int, kv []float32, offs []int) {
	if len(offs) < n {
		panic(fmt.Sprintf("ml: %s with %d positions and %d offsets", op, n, len(offs)))
	}
	lim := len(kv) - d
	for _, o := range offs[:n] {
		if o < 0 || o > lim {
			panic(fmt.Sprintf("ml: %s offset %d (+%d) outside %d values", op, o, d, len(kv)))
		}
	}
}

func attnScoresGeneric(dst, q, kv []float32, offs []int, scale float32) {
	d := len(q)
	for t, o := range offs[:len(dst)] {
		dst[t] = dotGeneric(q, kv[o:o+d]) * scale
	}
}

func attnAccumGeneric(out, w, kv []float32, offs []int) {
	d := len(out)
	for t, o := range offs[:len(w)] {
		axpyGeneric(out, w[t], kv[o:o+d])
	}
}

func siluMulGeneric(gate, up []float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		s := g * (1 / (1 + expf(-g)))
		gate[i] = s * up[i]
	}
}

func expShiftGeneric(x []float32, m float32) {
	for i, v := range x {
		x[i] = expf(v - m)
	}
}
