package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refDequantKV is the plain reading of ggml's Q8_0 / Q4_0 blocks, written
// from the format and not from the kernels: value = d * q, one f32 product.
func refDequantKV(q8 bool, src []byte, n int) []float32 {
	out := make([]float32, n)
	bb := 18
	if q8 {
		bb = 34
	}
	for b := range n / 32 {
		blk := src[b*bb:]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range 32 {
			var q int
			switch {
			case q8:
				q = int(int8(blk[2+j]))
			case j < 16:
				q = int(blk[2+j]&0xf) - 8
			default:
				q = int(blk[2+j-16]>>4) - 8
			}
			out[b*32+j] = float32(q) * d
		}
	}
	return out
}

// The row quantizers write what the allocating QuantizeQ8_0/QuantizeQ4_0
// (ggml's reference rounding) write, and expansion matches the reference.
func TestQuantizeRowKV(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{32, 64, 128, 256} {
		x := randF32(r, n)
		x[3] = 0
		zero := make([]float32, n) // an all-zero block has scale 0
		for _, src := range [][]float32{x, zero} {
			q8 := make([]byte, n/32*34)
			QuantizeRowQ8_0(q8, src)
			require.Equal(t, QuantizeQ8_0(src), q8)
			q4 := make([]byte, n/32*18)
			QuantizeRowQ4_0(q4, src)
			require.Equal(t, QuantizeQ4_0(src), q4)

			got := make([]float32, n)
			DequantizeRowQ8_0(got, q8)
			requireBits(t, refDequantKV(true, q8, n), got, n, "q8_0")
			DequantizeRowQ4_0(got, q4)
			requireBits(t, refDequantKV(false, q4, n), got, n, "q4_0")
			// Quantization error stays within half a step of each block.
			for b := range n / 32 {
				var amax float32
				for _, v := range src[b*32 : b*32+32] {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				DequantizeRowQ8_0(got, q8)
				for j := b * 32; j < b*32+32; j++ {
					require.InDelta(t, src[j], got[j], float64(amax/127*0.51)+1e-6, "q8_0 %d", j)
				}
				DequantizeRowQ4_0(got, q4)
				for j := b * 32; j < b*32+32; j++ {
					require.InDelta(t, src[j], got[j], float64(amax/8*1.01)+1e-6, "q4_0 %d", j)
				}
			}
		}
	}
	require.Panics(t, func() { QuantizeRowQ8_0(make([]byte, 34), make([]float32, 33)) })
	require.Panics(t, func() { QuantizeRowQ4_0(make([]byte, 17), make([]float32, 32)) })
}

// The quantized attention kernels equal AttnScores / AttnAccum over the
// reference-dequantized rows bit for bit, at every SIMD level, for any
// number of positions (chunk edges included) and scattered offsets.
func TestAttnQuantKV(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, q8 := range []bool{true, false} {
		bb := 18
		if q8 {
			bb = 34
		}
		for _, d := range []int{32, 64, 128} {
			rb := d / 32 * bb
			for _, n := range []int{1, 2, 7, 8, 9, attnChunk, attnChunk + 3, 3*attnChunk + 1} {
				const stride = 3
				rows := n*stride + 2
				kv := make([]byte, rows*rb)
				ref := make([]float32, rows*d)
				for i := range rows {
					x := randF32(r, d)
					if q8 {
						QuantizeRowQ8_0(kv[i*rb:(i+1)*rb], x)
					} else {
						QuantizeRowQ4_0(kv[i*rb:(i+1)*rb], x)
					}
					copy(ref[i*d:], refDequantKV(q8, kv[i*rb:(i+1)*rb], d))
				}
				offs, offsRef := make([]int, n), make([]int, n)
				for t := range offs {
					row := r.IntN(n*stride) + 1
					offs[t], offsRef[t] = row*rb, row*d
				}
				q := randF32(r, d)
				w := randF32(r, n)
				for _, lvl := range supportedLevels() {
					name := fmt.Sprintf("q8=%v d=%d n=%d level=%d", q8, d, n, lvl)
					saved := simdLevel()
					setSIMDLevel(lvl)
					want, got := make([]float32, n), make([]float32, n)
					AttnScores(want, q, ref, offsRef, 0.125)
					wo := randF32(r, d)
					gotO := append([]float32(nil), wo...)
					AttnAccum(wo, w, ref, offsRef)
					if q8 {
						AttnScoresQ8_0(got, q, kv, offs, 0.125)
						AttnAccumQ8_0(gotO, w, kv, offs)
					} else {
						AttnScoresQ4_0(got, q, kv, offs, 0.125)
						AttnAccumQ4_0(gotO, w, kv, offs)
					}
					setSIMDLevel(saved)
					requireBits(t, want, got, n, name+" scores")
					requireBits(t, wo, gotO, d, name+" accum")
				}
			}
		}
	}
}

// Bad offsets and head sizes panic with a message (they are programming
// errors inside the forward pass), never read outside the cache.
func TestAttnQuantKVBounds(t *testing.T) {
	kv := make([]byte, 4*34)
	q, dst := make([]float32, 32), make([]float32, 1)
	require.PanicsWithValue(t, "ml: AttnScoresQ8_0 offset 103 (+1 blocks) outside 136 bytes", func() {
		AttnScoresQ8_0(dst, q, kv, []int{103}, 1)
	})
	require.Panics(t, func() { AttnAccumQ4_0(q, dst, kv, []int{-1}) })
	require.Panics(t, func() { AttnScoresQ8_0(dst, make([]float32, 40), kv, []int{0}, 1) })
	require.Panics(t, func() { AttnScoresQ8_0(make([]float32, 2), q, kv, []int{0}, 1) })
	AttnScoresQ8_0(dst, q, kv, []int{102}, 1) // the last row fits
}

// The grouped kernels give every head what the one-head kernels give it,
// for every group size (8+4+2+1 splits included) and SIMD level.
func TestAttnQuantKVGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, q8 := range []bool{true, false} {
		bb := 18
		if q8 {
			bb = 34
		}
		for _, d := range []int{32, 64, 128} {
			rb := d / 32 * bb
			for _, g := range []int{1, 2, 3, 4, 7, 8, 15} {
				for _, n := range []int{1, 5, attnChunk + 3} {
					rows := 2*n + 2
					kv := make([]byte, rows*rb)
					for i := range rows {
						if q8 {
							QuantizeRowQ8_0(kv[i*rb:(i+1)*rb], randF32(r, d))
						} else {
							QuantizeRowQ4_0(kv[i*rb:(i+1)*rb], randF32(r, d))
						}
					}
					offs := make([]int, n)
					for t := range offs {
						offs[t] = (r.IntN(2*n) + 1) * rb
					}
					q, w, out0 := randF32(r, g*d), randF32(r, g*n), randF32(r, g*d)
					for _, lvl := range supportedLevels() {
						name := fmt.Sprintf("q8=%v d=%d g=%d n=%d level=%d", q8, d, g, n, lvl)
						saved := simdLevel()
						setSIMDLevel(lvl)
						want, got := make([]float32, g*n), make([]float32, g*n)
						wantO := append([]float32(nil), out0...)
						gotO := append([]float32(nil), out0...)
						for h := range g {
							if q8 {
								AttnScoresQ8_0(want[h*n:(h+1)*n], q[h*d:(h+1)*d], kv, offs, 0.3)
								AttnAccumQ8_0(wantO[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
							} else {
								AttnScoresQ4_0(want[h*n:(h+1)*n], q[h*d:(h+1)*d], kv, offs, 0.3)
								AttnAccumQ4_0(wantO[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
							}
						}
						if q8 {
							AttnScoresQ8_0Group(got, q, g, kv, offs, 0.3)
							AttnAccumQ8_0Group(gotO, w, g, kv, offs)
						} else {
							AttnScoresQ4_0Group(got, q, g, kv, offs, 0.3)
							AttnAccumQ4_0Group(gotO, w, g, kv, offs)
						}
						setSIMDLevel(saved)
						requireBits(t, want, got, g*n, name+" scores")
						requireBits(t, wantO, gotO, g*d, name+" accum")
					}
				}
			}
		}
	}
	require.Panics(t, func() { AttnScoresQ8_0Group(make([]float32, 3), make([]float32, 64), 2, make([]byte, 68), []int{0}, 1) })
}
