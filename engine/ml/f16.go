package ml

import "fmt"

// F16 vectors: the f16 KV cache stores keys and values as IEEE half
// precision (as llama.cpp's CPU default does) and attention reads them back
// as float32. Conversions are exact from f16 and round to nearest even
// into f16, at every SIMD level (F16C/AVX-512 VCVTPH2PS and VCVTPS2PH with
// rounding mode 0, or F16ToF32/F32ToF16 in Go).

// F16sToF32s converts len(dst) half-precision values of src.
func F16sToF32s(dst []float32, src []uint16) {
	if len(src) < len(dst) {
		panic(fmt.Sprintf("ml: F16sToF32s of %d values into %d", len(src), len(dst)))
	}
	if len(dst) > 0 {
		cvtF16F32(dst, src[:len(dst)])
	}
}

// F32sToF16s converts len(dst) values of src to half precision.
func F32sToF16s(dst []uint16, src []float32) {
	if len(src) < len(dst) {
		panic(fmt.Sprintf("ml: F32sToF16s of %d values into %d", len(src), len(dst)))
	}
	if len(dst) > 0 {
		cvtF32F16(dst, src[:len(dst)])
	}
}

func cvtF16F32Generic(dst []float32, src []uint16) {
	for i := range dst {
		dst[i] = F16ToF32(src[i])
	}
}

func cvtF32F16Generic(dst []uint16, src []float32) {
	for i := range dst {
		dst[i] = F32ToF16(src[i])
	}
}

// attnChunk is how many positions' f16 rows the f16 attention kernels
// convert at a time into a float32 scratch tile (L1-resident).
const attnChunk = 32

// AttnScoresF16 is AttnScores over f16 keys: each position's key row is
// converted exactly to float32 and scored with the same arithmetic, so a
// score equals AttnScores on the converted cache bit for bit, whatever the
// number of positions. With AVX-512 one fused kernel converts in registers
// (VCVTPH2PS); otherwise rows are converted into an L1-resident tile for
// the f32 kernels.
func AttnScoresF16(dst, q []float32, kv []uint16, offs []int, scale float32) {
	checkAttnF16("AttnScoresF16", len(dst), len(q), kv, offs)
	attnScoresF16(dst, q, kv, offs, scale)
}

// attnScoresF16 is AttnScoresF16 over offsets already checked.
func attnScoresF16(dst, q []float32, kv []uint16, offs []int, scale float32) {
	if len(dst) == 0 {
		return
	}
	d := len(q)
	if d == 0 {
		clear(dst)
		return
	}
	if attnScoresF16SIMD(dst, q, kv, offs[:len(dst)], scale) {
		return
	}
	buf := getScratch(attnChunk * d)
	defer scratch.Put(buf)
	var loc [attnChunk]int
	for t0 := 0; t0 < len(dst); t0 += attnChunk {
		m := min(attnChunk, len(dst)-t0)
		cvtF16Rows((*buf)[:m*d], kv, offs[t0:t0+m], d)
		for j := range m {
			loc[j] = j * d
		}
		attnScores(dst[t0:t0+m], q, *buf, loc[:m], scale)
	}
}

// AttnAccumF16 is AttnAccum over f16 values: out accumulates w[t] times
// the converted rows in order of t, identical to AttnAccum on the
// converted cache.
func AttnAccumF16(out, w []float32, kv []uint16, offs []int) {
	checkAttnF16("AttnAccumF16", len(w), len(out), kv, offs)
	attnAccumF16(out, w, kv, offs)
}

// attnAccumF16 is AttnAccumF16 over offsets already checked.
func attnAccumF16(out, w []float32, kv []uint16, offs []int) {
	d := len(out)
	if len(w) == 0 || d == 0 {
		return
	}
	if attnAccumF16SIMD(out, w, kv, offs[:len(w)]) {
		return
	}
	buf := getScratch(attnChunk * d)
	defer scratch.Put(buf)
	var loc [attnChunk]int
	for t0 := 0; t0 < len(w); t0 += attnChunk {
		m := min(attnChunk, len(w)-t0)
		cvtF16Rows((*buf)[:m*d], kv, offs[t0:t0+m], d)
		for j := range m {
			loc[j] = j * d
		}
		attnAccum(out, w[t0:t0+m], *buf, loc[:m])
	}
}

// cvtF16Rows converts the rows of d values at kv[offs[j]:] to consecutive
// float32 rows of dst.
func cvtF16Rows(dst []float32, kv []uint16, offs []int, d int) {
	for j, o := range offs {
		cvtF16F32(dst[j*d:(j+1)*d], kv[o:o+d])
	}
}

func checkAttnF16(op string, n, d int, kv []uint16, offs []int) {
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
