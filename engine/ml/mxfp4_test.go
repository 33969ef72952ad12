package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// mxfp4DotRef is ggml's ggml_vec_dot_mxfp4_q8_0_generic written out for
// one weight row and one quantized activation row (our Q8 activation
// blocks carry an f32 scale where ggml's carry an f16 one): per block the
// int32 sums of code times activation over both nibble halves, then
// sumf += (dx*2^(e-128)) * (sum1+sum2).
func mxfp4DotRef(row, act []byte) float32 {
	var sumf float32
	for b := 0; b < len(row)/17; b++ {
		blk := row[b*17 : (b+1)*17]
		dx, _, q := q8Act(act[b*q8ActBlock:])
		d := float32(dx * float32(math.Ldexp(1, int(blk[0])-128)))
		var s1, s2 int32
		for j := 0; j < 16; j++ {
			s1 += int32(int8(q[j])) * int32(kvaluesMXFP4[blk[1+j]&0xf])
			s2 += int32(int8(q[j+16])) * int32(kvaluesMXFP4[blk[1+j]>>4])
		}
		// The explicit conversion keeps arm64 from fusing the multiply
		// into the add (dotScaled rounds the product first).
		sumf += float32(d * float32(s1+s2))
	}
	return sumf
}

func TestE8M0Half(t *testing.T) {
	for e := 0; e < 256; e++ {
		require.Equal(t, float32(math.Ldexp(1, e-128)), e8m0Half(byte(e)), "e=%d", e)
	}
}

// TestMXFP4MatMulBits requires every SIMD level's MXFP4 product to equal
// the ggml-style reference dot bit for bit, for batch sizes around the
// kernel's tiles, also when some 16-row tiles hold scales f16 cannot
// represent (the kernels fall back to the reference there) or such scales
// on all-zero blocks (which the expansion keeps).
func TestMXFP4MatMulBits(t *testing.T) {
	defer SetThreads(0)
	// 11 blocks a row: an odd count, as the one-row kernels take two a step.
	const rows, cols = 53, 352
	r := rand.New(rand.NewPCG(39, 1))
	for _, scales := range []string{"in f16 range", "tiny and huge", "zero blocks"} {
		data := randBlocks(r, MXFP4, rows*cols/32)
		switch scales {
		case "tiny and huge":
			data[17*(3*cols/32)] = 2 // row 3, first block: 2^-126
			for b := 0; b < cols/32; b++ {
				data[17*(10*cols/32+b)] = 1 // row 10: 2^-127, subnormal
				data[17*(11*cols/32+b)] = 0 // row 11: 2^-128
			}
			data[17*(40*cols/32+5)] = 200    // row 40
			data[17*(20*cols/32+9)] = 103    // row 20: just below f16's range
			data[17*(20*cols/32+9)+1] = 0x22 // keeps a nonzero value
		case "zero blocks":
			for _, b := range []int{0, 7, 33*cols/32 + 2} {
				data[17*b] = byte(r.IntN(2) * 255)
				for j := 1; j < 17; j++ {
					data[17*b+j] = byte(r.IntN(2)<<3 | r.IntN(2)<<7) // +0 and -0 codes
				}
			}
		}
		w, err := NewMatrix(MXFP4, rows, cols, data)
		require.NoError(t, err)
		for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 17} {
			x := randF32(r, n*cols)
			act := make([]byte, n*cols/32*q8ActBlock)
			for i := 0; i < n; i++ {
				quantizeActQ8Generic(act[i*cols/32*q8ActBlock:], x[i*cols:(i+1)*cols])
			}
			rb := cols / 32 * 17
			want := make([]float32, n*rows)
			for i := 0; i < n; i++ {
				for o := 0; o < rows; o++ {
					want[i*rows+o] = mxfp4DotRef(data[o*rb:(o+1)*rb], act[i*cols/32*q8ActBlock:(i+1)*cols/32*q8ActBlock])
				}
			}
			for _, lvl := range supportedLevels() {
				saved := simdLevel()
				setSIMDLevel(lvl)
				for _, threads := range []int{1, 3} {
					SetThreads(threads)
					got := make([]float32, n*rows)
					MatMul(got, x, n, w)
					requireBits(t, want, got, rows, fmt.Sprintf("%s n=%d level %d threads %d", scales, n, lvl, threads))
				}
				if lvl != levelGeneric {
					got := make([]float32, n*rows)
					require.True(t, matmulMXFP4SIMD(got, act, n, w, rb, 0, rows), "level %d has a kernel", lvl)
					requireBits(t, want, got, rows, fmt.Sprintf("%s n=%d level %d kernel", scales, n, lvl))
				}
				setSIMDLevel(saved)
			}
		}
	}
}

// BenchmarkMXFP4 measures the MXFP4 product against IQ4_NL and Q4_0 (the
// other 4-bit 32-value types) on gpt-oss-20b's expert shape (2880 x 2880),
// one thread, for one activation row (decode) and eight, at each SIMD
// level. Reports weight bytes read per second (wall and thread CPU time)
// and multiply-adds per CPU second.
func BenchmarkMXFP4(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	names := []string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}
	const rows, cols = 2880, 2880
	for _, ty := range []Type{MXFP4, IQ4_NL, Q4_0} {
		r := rand.New(rand.NewPCG(uint64(ty), 5))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/32))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 8} {
			x := randF32(r, n*cols)
			dst := make([]float32, n*rows)
			for _, lvl := range supportedLevels() {
				b.Run(fmt.Sprintf("%v/n=%d/%s", ty, n, names[lvl]), func(b *testing.B) {
					saved := simdLevel()
					setSIMDLevel(lvl)
					defer setSIMDLevel(saved)
					// CPU time of this thread too: steadier than wall time
					// on a shared machine.
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					cpu0 := threadCPU()
					for range b.N {
						MatMul(dst, x, n, w)
					}
					bytes := float64(b.N) * float64(len(w.Data))
					b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
					b.ReportMetric(bytes/(threadCPU()-cpu0)/1e9, "cpu-GB/s")
					b.ReportMetric(float64(b.N)*rows*cols*float64(n)/(threadCPU()-cpu0)/1e9, "cpu-GMAC/s")
				})
			}
		}
	}
}

// TestQuantizeMXFP4 pins ggml's rounding on a hand-computed block and
// bounds the round-trip error of random blocks.
func TestQuantizeMXFP4(t *testing.T) {
	x := make([]float32, 32)
	// amax 6: e = floor(log2 6) - 2 + 127 = 127, codes step 0.5 up to 6.
	copy(x, []float32{6, 0.25, -1.25, 2.9, -7, 5.5, 1e-9, -0.75})
	blk := QuantizeMXFP4(x)
	require.Len(t, blk, 17)
	require.Equal(t, byte(127), blk[0])
	got := make([]float32, 32)
	dequantMXFP4(got, blk)
	// 0.25 and -1.25 are ties: the first code in table order wins (0, -1);
	// 2.9 rounds to 3, -7 clips to -6, 5.5 to 6, -0.75 ties to -0.5.
	require.Equal(t, []float32{6, 0, -1, 3, -6, 6, 0, -0.5}, got[:8])
	require.Equal(t, make([]byte, 17), QuantizeMXFP4(make([]float32, 32)), "all-zero block")

	r := rand.New(rand.NewPCG(39, 3))
	src := randF32(r, 32*64)
	m, err := Quantize(MXFP4, 64, 32, src)
	require.NoError(t, err)
	row := make([]float32, 32)
	for i := 0; i < 64; i++ {
		Dequantize(row, m, i)
		var amax float64
		for _, v := range src[i*32 : i*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		step := math.Ldexp(1, int(math.Floor(math.Log2(amax)))-1) // the widest gap between codes
		for j, v := range row {
			require.InDelta(t, src[i*32+j], v, step, "row %d value %d", i, j)
		}
	}
}
