package ml

import "fmt"

// Grouped-query attention over a block-quantized KV cache: the g query
// heads that share one KV head (consecutive heads, as in GQA) are scored
// and summed in one pass over the KV rows, so each block is expanded once
// for all of them rather than once per head. Every head's results equal
// AttnScoresQ8_0 / AttnAccumQ8_0 (and the Q4_0 ones) for that head alone,
// bit for bit: the kernels run each head's operations in the same order.

// AttnScoresQ8_0Group is AttnScoresQ8_0 for g heads at once: q holds the
// heads' queries back to back (g*d values), dst their scores (g*n values,
// head h's at dst[h*n:(h+1)*n]).
func AttnScoresQ8_0Group(dst, q []float32, g int, kv []byte, offs []int, scale float32) {
	attnScoresQGroup(kvQ8_0, dst, q, g, kv, offs, scale)
}

// AttnScoresQ4_0Group is AttnScoresQ8_0Group for Q4_0 keys.
func AttnScoresQ4_0Group(dst, q []float32, g int, kv []byte, offs []int, scale float32) {
	attnScoresQGroup(kvQ4_0, dst, q, g, kv, offs, scale)
}

// AttnAccumQ8_0Group is AttnAccumQ8_0 for g heads at once: out holds the
// heads' outputs back to back (g*d values), w their weights (g*n values,
// head h's at w[h*n:(h+1)*n]).
func AttnAccumQ8_0Group(out, w []float32, g int, kv []byte, offs []int) {
	attnAccumQGroup(kvQ8_0, out, w, g, kv, offs)
}

// AttnAccumQ4_0Group is AttnAccumQ8_0Group for Q4_0 values.
func AttnAccumQ4_0Group(out, w []float32, g int, kv []byte, offs []int) {
	attnAccumQGroup(kvQ4_0, out, w, g, kv, offs)
}

func checkGroup(op string, g, nq, nd int) (d, n int) {
	if g <= 0 || nq%g != 0 || nd%g != 0 {
		panic(fmt.Sprintf("ml: %s with %d heads over %d query and %d score values", op, g, nq, nd))
	}
	return nq / g, nd / g
}

// groupChunk is the largest grouped kernel width (8, 4 or 2) not above g,
// or 1.
func groupChunk(g int) int {
	for _, c := range []int{8, 4, 2} {
		if g >= c {
			return c
		}
	}
	return 1
}

func attnScoresQGroup(k kvQuant, dst, q []float32, g int, kv []byte, offs []int, scale float32) {
	d, n := checkGroup("AttnScores"+k.name+"Group", g, len(q), len(dst))
	for h := 0; h < g; {
		gc := groupChunk(g - h)
		sk := groupKernel(k, gc)
		if sk == nil || n == 0 || d == 0 {
			attnScoresQ(k, dst[h*n:(h+1)*n], q[h*d:(h+1)*d], kv, offs, scale)
			h++
			continue
		}
		checkAttnQ(k, "AttnScores", n, d, kv, offs)
		// The kernel reads the queries as [block][head][32] and writes
		// the scores as [t][head].
		nb := d / 32
		qi := getScratch(gc*d + gc*n)
		qs, ds := (*qi)[:gc*d], (*qi)[gc*d:]
		for b := range nb {
			for j := range gc {
				copy(qs[(b*gc+j)*32:(b*gc+j+1)*32], q[(h+j)*d+b*32:(h+j)*d+b*32+32])
			}
		}
		sk(&ds[0], &qs[0], &kv[0], &offs[0], n, nb, scale)
		for j := range gc {
			row := dst[(h+j)*n : (h+j+1)*n]
			for t := range row {
				row[t] = ds[t*gc+j]
			}
		}
		scratch.Put(qi)
		h += gc
	}
}

func attnAccumQGroup(k kvQuant, out, w []float32, g int, kv []byte, offs []int) {
	d, n := checkGroup("AttnAccum"+k.name+"Group", g, len(out), len(w))
	for h := 0; h < g; {
		gc := groupChunk(g - h)
		if gc == 1 {
			attnAccumQ(k, out[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
			h++
			continue
		}
		ak := accumKernel(k, gc, len(out)/g/32)
		if ak == nil || n == 0 || d == 0 {
			attnAccumQ(k, out[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
			h++
			continue
		}
		checkAttnQ(k, "AttnAccum", n, d, kv, offs)
		// The kernel keeps the outputs as [block][head][32] and reads the
		// weights as [t][head].
		nb := d / 32
		sc := getScratch(gc*d + gc*n)
		os, ws := (*sc)[:gc*d], (*sc)[gc*d:]
		for b := range nb {
			for j := range gc {
				copy(os[(b*gc+j)*32:(b*gc+j+1)*32], out[(h+j)*d+b*32:(h+j)*d+b*32+32])
			}
		}
		for j := range gc {
			for t, x := range w[(h+j)*n : (h+j+1)*n] {
				ws[t*gc+j] = x
			}
		}
		ak(&os[0], &ws[0], &kv[0], &offs[0], n, nb)
		for b := range nb {
			for j := range gc {
				copy(out[(h+j)*d+b*32:(h+j)*d+b*32+32], os[(b*gc+j)*32:(b*gc+j+1)*32])
			}
		}
		scratch.Put(sc)
		h += gc
	}
}
