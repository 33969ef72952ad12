package ml

import (
	"fmt"

	"github.com/kvwarden/kvwarden/internal/blockq"
)

// Block-quantized KV cache (q8_0, q4_0): each K or V row of a head is
// stored as ggml Q8_0 or Q4_0 blocks of 32 values along the head
// dimension. Attention reads the blocks where they lie: per chunk of
// attnChunk positions the rows are expanded, block by block, into an
// L1-resident float32 tile and scored (or accumulated) with the f32
// kernels, so no dequantized copy of the cache exists and the query stays
// in float32. With AVX-512 fused kernels (attnq_amd64.s) expand each block
// in registers instead, with the same arithmetic. Expansion is exact (one f32 product d*q per value), so
// AttnScoresQ8_0 equals AttnScores over the dequantized rows bit for bit,
// whatever the SIMD level and the number of positions; the same holds for
// the other three kernels.

// QuantizeRowQ8_0 encodes src (len a multiple of 32) into dst
// (len(src)/32*34 bytes) as QuantizeQ8_0 does, without allocating.
func QuantizeRowQ8_0(dst []byte, src []float32) { blockq.QuantizeRowQ8_0(dst, src) }

// QuantizeRowQ4_0 encodes src (len a multiple of 32) into dst
// (len(src)/32*18 bytes) as QuantizeQ4_0 does, without allocating.
func QuantizeRowQ4_0(dst []byte, src []float32) { blockq.QuantizeRowQ4_0(dst, src) }

// DequantizeRowQ8_0 expands len(dst)/32 Q8_0 blocks of src into dst.
func DequantizeRowQ8_0(dst []float32, src []byte) {
	checkQuantRow("DequantizeRowQ8_0", len(src), len(dst), 34)
	dequantQ8_0(dst, src)
}

// DequantizeRowQ4_0 expands len(dst)/32 Q4_0 blocks of src into dst.
func DequantizeRowQ4_0(dst []float32, src []byte) {
	checkQuantRow("DequantizeRowQ4_0", len(src), len(dst), 18)
	dequantQ4_0KV(dst, src)
}

func checkQuantRow(op string, nbytes, nvals, blockBytes int) {
	if nvals%32 != 0 || nbytes < nvals/32*blockBytes {
		panic(fmt.Sprintf("ml: %s of %d values into %d bytes (want a multiple of 32 values, %d bytes per 32)", op, nvals, nbytes, blockBytes))
	}
}

// kvQuant describes one block-quantized KV type to the shared kernels.
type kvQuant struct {
	name       string
	blockBytes int
	expand     func(dst []float32, src []byte)
}

var (
	kvQ8_0 = kvQuant{"Q8_0", 34, dequantQ8_0}
	kvQ4_0 = kvQuant{"Q4_0", 18, dequantQ4_0KV}
)

// AttnScoresQ8_0 is AttnScores over Q8_0 keys: offs[t] is the byte offset
// in kv of position t's key row of len(q) values (len(q)/32 blocks).
func AttnScoresQ8_0(dst, q []float32, kv []byte, offs []int, scale float32) {
	attnScoresQ(kvQ8_0, dst, q, kv, offs, scale)
}

// AttnScoresQ4_0 is AttnScoresQ8_0 for Q4_0 keys.
func AttnScoresQ4_0(dst, q []float32, kv []byte, offs []int, scale float32) {
	attnScoresQ(kvQ4_0, dst, q, kv, offs, scale)
}

// AttnAccumQ8_0 is AttnAccum over Q8_0 values: out accumulates w[t] times
// the row of len(out) values at byte offset offs[t], in order of t.
func AttnAccumQ8_0(out, w []float32, kv []byte, offs []int) {
	attnAccumQ(kvQ8_0, out, w, kv, offs)
}

// AttnAccumQ4_0 is AttnAccumQ8_0 for Q4_0 values.
func AttnAccumQ4_0(out, w []float32, kv []byte, offs []int) {
	attnAccumQ(kvQ4_0, out, w, kv, offs)
}

func attnScoresQ(k kvQuant, dst, q []float32, kv []byte, offs []int, scale float32) {
	d := len(q)
	checkAttnQ(k, "AttnScores", len(dst), d, kv, offs)
	if len(dst) == 0 {
		return
	}
	if d == 0 {
		clear(dst)
		return
	}
	if attnScoresQSIMD(k, dst, q, kv, offs, scale) {
		return
	}
	buf := getScratch(attnChunk * d)
	defer scratch.Put(buf)
	var loc [attnChunk]int
	rb := d / 32 * k.blockBytes
	for t0 := 0; t0 < len(dst); t0 += attnChunk {
		m := min(attnChunk, len(dst)-t0)
		for j, o := range offs[t0 : t0+m] {
			k.expand((*buf)[j*d:(j+1)*d], kv[o:o+rb])
			loc[j] = j * d
		}
		attnScores(dst[t0:t0+m], q, *buf, loc[:m], scale)
	}
}

func attnAccumQ(k kvQuant, out, w []float32, kv []byte, offs []int) {
	d := len(out)
	checkAttnQ(k, "AttnAccum", len(w), d, kv, offs)
	if len(w) == 0 || d == 0 {
		return
	}
	if attnAccumQSIMD(k, out, w, kv, offs) {
		return
	}
	buf := getScratch(attnChunk * d)
	defer scratch.Put(buf)
	var loc [attnChunk]int
	rb := d / 32 * k.blockBytes
	for t0 := 0; t0 < len(w); t0 += attnChunk {
		m := min(attnChunk, len(w)-t0)
		for j, o := range offs[t0 : t0+m] {
			k.expand((*buf)[j*d:(j+1)*d], kv[o:o+rb])
			loc[j] = j * d
		}
		attnAccum(out, w[t0:t0+m], *buf, loc[:m])
	}
}

func checkAttnQ(k kvQuant, op string, n, d int, kv []byte, offs []int) {
	if d%32 != 0 {
		panic(fmt.Sprintf("ml: %s%s over rows of %d values, not a multiple of 32", op, k.name, d))
	}
	if len(offs) < n {
		panic(fmt.Sprintf("ml: %s%s with %d positions and %d offsets", op, k.name, n, len(offs)))
	}
	lim := len(kv) - d/32*k.blockBytes
	for _, o := range offs[:n] {
		if o < 0 || o > lim {
			panic(fmt.Sprintf("ml: %s%s offset %d (+%d blocks) outside %d bytes", op, k.name, o, d/32, len(kv)))
		}
	}
}

// dequantQ4_0KV is dequantQ4_0 (the same values: each an exact f32
// product), through a 16-entry table of q-8 so the hot loop has no integer
// conversions.
func dequantQ4_0KV(dst []float32, src []byte) {
	dequantQ4_0Generic(dst, src)
}

var q4Vals = [16]float32{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

func dequantQ4_0Generic(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := f16At(blk, 0)
		y := dst[b*32 : b*32+32]
		qs := blk[2:18]
		for j, v := range qs {
			y[j] = q4Vals[v&0xf] * d
			y[j+16] = q4Vals[v>>4] * d
		}
	}
}
