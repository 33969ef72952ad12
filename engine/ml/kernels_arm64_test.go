//go:build arm64 && !purego

package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARM64Features checks the CPU features the kernels were dispatched on
// against KVWARDEN_EXPECT_DOTPROD (1 or 0) when it is set: scripts/test.sh
// runs the kernel tests under qemu with and without FEAT_DotProd and sets
// it, so a qemu that ignored the CPU model would fail here instead of
// silently testing one variant twice.
func TestARM64Features(t *testing.T) {
	t.Logf("dotprod %v, levels %v", hasDotProd, supportedLevels())
	want := os.Getenv("KVWARDEN_EXPECT_DOTPROD")
	if want == "" {
		t.Skip("KVWARDEN_EXPECT_DOTPROD not set")
	}
	require.Equal(t, want == "1", hasDotProd, "FEAT_DotProd detected")
	lv := supportedLevels()
	require.Equal(t, levelNEON, lv[1])
	require.Equal(t, hasDotProd, len(lv) == 3 && lv[2] == levelDotProd)
}

// TestNEONKernelsRun requires every arm64 integer kernel, at every level
// the CPU has, to compute the products through MatMul (counted in
// neonCalls) with the reference bits, for single rows and batches, row
// counts around 4 and several widths.
func TestNEONKernelsRun(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	r := rand.New(rand.NewPCG(28, 2))
	for _, ty := range []Type{Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		for _, s := range []struct{ rows, cols int }{{1, 256}, {5, 512}, {16, 768}, {33, 256}} {
			w := randMatrix(t, r, ty, s.rows, s.cols)
			rb, err := ty.RowBytes(s.cols)
			require.NoError(t, err)
			tr := ty.traits()
			as := s.cols / tr.act.blockSize() * tr.act.blockBytes()
			for _, n := range []int{1, 3, 8} {
				x := randF32(r, n*s.cols)
				act := make([]byte, n*as)
				for i := 0; i < n; i++ {
					quantizeActGeneric(tr.act, act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
				}
				want := make([]float32, n*s.rows)
				matmulIntGeneric(want, act, n, w, rb, 0, s.rows)
				for _, lvl := range supportedLevels()[1:] {
					saved := simdLevel()
					setSIMDLevel(lvl)
					before := neonCalls.Load()
					got := make([]float32, n*s.rows)
					MatMul(got, x, n, w)
					ran := neonCalls.Load() - before
					setSIMDLevel(saved)
					what := fmt.Sprintf("%v %dx%d n=%d level=%d", ty, s.rows, s.cols, n, lvl)
					require.Equal(t, int64(n*s.rows), ran, "%s: outputs from the arm64 kernels", what)
					requireBits(t, want, got, s.rows, what)
				}
			}
		}
	}
}

// TestQuantizeActQ8NEON requires the NEON Q8 and Q8_K activation encoders
// to give the reference bytes on random rows and on blocks of zeros,
// signed zeros, a NaN, infinities, exact halves, subnormals and values
// beyond int8 after scaling.
func TestQuantizeActQ8NEON(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 3))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	const n = 512
	for trial := 0; trial < 64; trial++ {
		x := randF32(r, n)
		for b := 0; b < n/32; b++ {
			blk := x[b*32 : (b+1)*32]
			switch (trial + b) % 9 {
			case 1:
				clear(blk)
			case 2:
				for i := range blk {
					blk[i] = float32(math.Copysign(0, float64(1-2*(i&1))))
				}
			case 3:
				blk[r.IntN(32)] = nan
			case 4:
				blk[r.IntN(32)] = -inf
			case 5:
				for i := range blk {
					blk[i] = float32(r.IntN(254)-127) + 0.5
				}
				blk[r.IntN(32)] = 127
			case 6:
				for i := range blk {
					blk[i] *= 1e-42
				}
			case 7:
				blk[r.IntN(32)], blk[r.IntN(32)] = 9, -9
			case 8:
				for i := range blk {
					blk[i] *= 3e38
				}
			}
		}
		for _, lvl := range supportedLevels()[1:] {
			saved := simdLevel()
			setSIMDLevel(lvl)
			want := make([]byte, n/32*q8ActBlock)
			got := make([]byte, len(want))
			quantizeActQ8Generic(want, x)
			quantizeActQ8(got, x)
			wantK := make([]byte, n/256*q8KActBlock)
			gotK := make([]byte, len(wantK))
			for i := range gotK {
				gotK[i] = 0xa5
			}
			quantizeActQ8KGeneric(wantK, x)
			quantizeActQ8K(gotK, x)
			setSIMDLevel(saved)
			require.Equal(t, want, got, "Q8 trial %d level %d", trial, lvl)
			require.Equal(t, wantK, gotK, "Q8_K trial %d level %d", trial, lvl)
		}
	}
}

// BenchmarkNEONLevels runs one product per type at each arm64 level (one
// thread, a 64x2048 matrix, one activation row; Q8_0 also four rows),
// SiLUMul and Dot over 2048 values. Under qemu the times mean nothing;
// bench/qemu-insn counts the instructions it executes instead.
func BenchmarkNEONLevels(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	names := []string{levelGeneric: "generic", levelNEON: "neon", levelDotProd: "dotprod"}
	const rows, cols = 64, 2048
	r := rand.New(rand.NewPCG(28, 4))
	level := func(b *testing.B, lvl int) {
		saved := simdLevel()
		setSIMDLevel(lvl)
		b.Cleanup(func() { setSIMDLevel(saved) })
	}
	for _, ty := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		x := randF32(r, 4*cols)
		dst := make([]float32, 4*rows)
		for _, lvl := range supportedLevels() {
			b.Run(fmt.Sprintf("%v/%s", ty, names[lvl]), func(b *testing.B) {
				level(b, lvl)
				for range b.N {
					MatMul(dst[:rows], x[:cols], 1, w)
				}
				b.ReportMetric(float64(b.N)*rows*cols/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
			if ty != Q8_0 {
				continue
			}
			// Four activation rows: the four-row kernel.
			b.Run(fmt.Sprintf("%vx4/%s", ty, names[lvl]), func(b *testing.B) {
				level(b, lvl)
				for range b.N {
					MatMul(dst, x, 4, w)
				}
				b.ReportMetric(float64(b.N)*4*rows*cols/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
	g, u := randF32(r, cols), randF32(r, cols)
	for _, lvl := range supportedLevels() {
		b.Run("SiLUMul/"+names[lvl], func(b *testing.B) {
			level(b, lvl)
			for range b.N {
				SiLUMul(g, u)
			}
		})
		b.Run("Dot/"+names[lvl], func(b *testing.B) {
			level(b, lvl)
			for range b.N {
				Dot(g, u)
			}
		})
	}
}

// BenchmarkNEONAttn runs one head of attention (scores and the weighted
// sum) over 512 positions of 128 values, f16 and Q8_0 keys and values (as
// many multiply-adds as one of BenchmarkNEONLevels' products), at each
// arm64 level.
func BenchmarkNEONAttn(b *testing.B) {
	names := []string{levelGeneric: "generic", levelNEON: "neon", levelDotProd: "dotprod"}
	r := rand.New(rand.NewPCG(28, 6))
	level := func(b *testing.B, lvl int) {
		saved := simdLevel()
		setSIMDLevel(lvl)
		b.Cleanup(func() { setSIMDLevel(saved) })
	}
	const pos, hd = 512, 128
	kv16 := make([]uint16, pos*hd)
	for i := range kv16 {
		kv16[i] = F32ToF16(float32(r.NormFloat64()))
	}
	kvq := make([]byte, pos*hd/32*34)
	QuantizeRowQ8_0(kvq, randF32(r, pos*hd))
	offs16, offsQ := make([]int, pos), make([]int, pos)
	for i := range pos {
		offs16[i], offsQ[i] = i*hd, i*hd/32*34
	}
	q, out, sc := randF32(r, hd), make([]float32, hd), make([]float32, pos)
	for _, lvl := range supportedLevels() {
		b.Run("AttnF16/"+names[lvl], func(b *testing.B) {
			level(b, lvl)
			for range b.N {
				AttnScoresF16(sc, q, kv16, offs16, 0.125)
				AttnAccumF16(out, sc, kv16, offs16)
			}
		})
		b.Run("AttnQ8_0/"+names[lvl], func(b *testing.B) {
			level(b, lvl)
			for range b.N {
				AttnScoresQ8_0(sc, q, kvq, offsQ, 0.125)
				AttnAccumQ8_0(out, sc, kvq, offsQ)
			}
		})
	}
}

// TestNEONHalfRowsMatchF32 requires F16 products to equal, bit
// for bit, the F32 product over the exactly decoded weights at every
// level, through the arm64 row kernels (counted), K with and without a
// tail of fewer than 16 values, batches of one and several rows.
func TestNEONHalfRowsMatchF32(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	r := rand.New(rand.NewPCG(28, 5))
	for _, ty := range []Type{F16} { // BF16: TestBF16MatMulMatchesRef
		for _, s := range []struct{ rows, cols int }{{7, 20}, {9, 64}, {5, 2061}} {
			w := randMatrix(t, r, ty, s.rows, s.cols)
			dec := make([]float32, s.rows*s.cols)
			for i := 0; i < s.rows; i++ {
				Dequantize(dec[i*s.cols:(i+1)*s.cols], w, i)
			}
			w32, err := Quantize(F32, s.rows, s.cols, dec)
			require.NoError(t, err)
			for _, n := range []int{1, 3} {
				x := randF32(r, n*s.cols)
				for _, lvl := range supportedLevels()[1:] {
					saved := simdLevel()
					setSIMDLevel(lvl)
					want := make([]float32, n*s.rows)
					got := make([]float32, n*s.rows)
					MatMul(want, x, n, w32)
					before := neonCalls.Load()
					MatMul(got, x, n, w)
					ran := neonCalls.Load() - before
					setSIMDLevel(saved)
					what := fmt.Sprintf("%v %dx%d n=%d level=%d", ty, s.rows, s.cols, n, lvl)
					require.Equal(t, int64(n*s.rows), ran, "%s: outputs from the arm64 kernels", what)
					requireBits(t, want, got, s.rows, what)
				}
			}
		}
	}
}

// TestAttnF16NEON requires the arm64 f16 attention (dotF16 scores,
// axpyF16NEON accumulation) to run at every NEON level, counted in
// attnF16Calls, and to give the bits of the f32 kernels at that level on
// the converted cache, for head widths with and without 16-value tails.
func TestAttnF16NEON(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 16))
	for _, d := range []int{8, 16, 44, 64, 128} {
		for _, n := range []int{1, 5, 40} {
			kv16 := make([]uint16, (2*n+1)*d)
			for i := range kv16 {
				kv16[i] = F32ToF16(float32(r.NormFloat64()))
			}
			kv32 := make([]float32, len(kv16))
			cvtF16F32Generic(kv32, kv16)
			offs := make([]int, n)
			for i := range offs {
				offs[i] = r.IntN(2*n+1) * d
			}
			q, w, acc := randF32(r, d), randF32(r, n), randF32(r, d)
			for _, lvl := range supportedLevels()[1:] {
				what := fmt.Sprintf("d=%d n=%d level=%d", d, n, lvl)
				saved := simdLevel()
				setSIMDLevel(lvl)
				want, got := make([]float32, n), make([]float32, n)
				wantAcc, gotAcc := append([]float32(nil), acc...), append([]float32(nil), acc...)
				AttnScores(want, q, kv32, offs, 0.125)
				AttnAccum(wantAcc, w, kv32, offs)
				before := attnF16Calls.Load()
				AttnScoresF16(got, q, kv16, offs, 0.125)
				AttnAccumF16(gotAcc, w, kv16, offs)
				ran := attnF16Calls.Load() - before
				setSIMDLevel(saved)
				require.Equal(t, int64(2*n), ran, "%s: positions through the arm64 f16 kernels", what)
				requireBits(t, want, got, n, what+" scores")
				requireBits(t, wantAcc, gotAcc, d, what+" accum")
			}
		}
	}
}

// TestAttnQ8NEON requires the arm64 Q8_0 KV attention kernels to run at
// every NEON level, counted in attnQ8Calls, one head and grouped, and to
// give the bits of the f32 kernels at that level on the dequantized cache
// (the tile path's arithmetic).
func TestAttnQ8NEON(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 8))
	for _, d := range []int{32, 64, 128} {
		for _, n := range []int{1, 5, 40} {
			const g = 2
			rb := d / 32 * 34
			rows := 2*n + 1
			kv := make([]byte, rows*rb)
			kv32 := make([]float32, rows*d)
			for i := range rows {
				x := randF32(r, d)
				QuantizeRowQ8_0(kv[i*rb:(i+1)*rb], x)
				dequantQ8Generic(kv32[i*d:(i+1)*d], kv[i*rb:(i+1)*rb])
			}
			offs, offs32 := make([]int, n), make([]int, n)
			for i := range offs {
				row := r.IntN(rows)
				offs[i], offs32[i] = row*rb, row*d
			}
			q, w, acc := randF32(r, g*d), randF32(r, g*n), randF32(r, g*d)
			for _, lvl := range supportedLevels()[1:] {
				what := fmt.Sprintf("d=%d n=%d level=%d", d, n, lvl)
				saved := simdLevel()
				setSIMDLevel(lvl)
				want, wantAcc := make([]float32, g*n), append([]float32(nil), acc...)
				for h := range g {
					AttnScores(want[h*n:(h+1)*n], q[h*d:(h+1)*d], kv32, offs32, 0.125)
					AttnAccum(wantAcc[h*d:(h+1)*d], w[h*n:(h+1)*n], kv32, offs32)
				}
				got, gotAcc := make([]float32, g*n), append([]float32(nil), acc...)
				before := attnQ8Calls.Load()
				AttnScoresQ8_0(got[:n], q[:d], kv, offs, 0.125)
				AttnAccumQ8_0(gotAcc[:d], w[:n], kv, offs)
				ran := attnQ8Calls.Load() - before
				gotG, gotAccG := make([]float32, g*n), append([]float32(nil), acc...)
				AttnScoresQ8_0Group(gotG, q, g, kv, offs, 0.125)
				AttnAccumQ8_0Group(gotAccG, w, g, kv, offs)
				ranG := attnQ8Calls.Load() - before - ran
				setSIMDLevel(saved)
				require.Equal(t, int64(2*n), ran, "%s: positions through the arm64 Q8_0 kernels", what)
				require.Equal(t, int64(2*g*n), ranG, "%s: grouped positions through the arm64 Q8_0 kernels", what)
				requireBits(t, want[:n], got[:n], 1, what+" scores")
				requireBits(t, wantAcc[:d], gotAcc[:d], 1, what+" accum")
				requireBits(t, want, gotG, g, what+" grouped scores")
				requireBits(t, wantAcc, gotAccG, g, what+" grouped accum")
			}
		}
	}
}

// TestNEONx4Rows requires batches of four or more activation rows of a
// Q8_0, Q4_0, IQ4_NL or Q5_0 product to go through the four-row kernel
// (counted in neonX4Calls) for every whole group of four, at every level,
// with the reference bits.
func TestNEONx4Rows(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	r := rand.New(rand.NewPCG(28, 4))
	for _, c := range []struct {
		ty         Type
		rows, cols int
	}{{Q8_0, 3, 32}, {Q8_0, 7, 512}, {Q4_0, 5, 256}, {IQ4_NL, 5, 256}, {Q5_0, 3, 32}, {Q5_0, 5, 512}} {
		s, ty := c, c.ty
		w := randMatrix(t, r, ty, s.rows, s.cols)
		rb, err := ty.RowBytes(s.cols)
		require.NoError(t, err)
		as := s.cols / 32 * q8ActBlock
		for _, n := range []int{4, 5, 8, 11} {
			x := randF32(r, n*s.cols)
			act := make([]byte, n*as)
			for i := 0; i < n; i++ {
				quantizeActGeneric(ty.traits().act, act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
			}
			want := make([]float32, n*s.rows)
			matmulIntGeneric(want, act, n, w, rb, 0, s.rows)
			for _, lvl := range supportedLevels()[1:] {
				saved := simdLevel()
				setSIMDLevel(lvl)
				before := neonX4Calls.Load()
				got := make([]float32, n*s.rows)
				MatMul(got, x, n, w)
				ran := neonX4Calls.Load() - before
				setSIMDLevel(saved)
				what := fmt.Sprintf("%v %dx%d n=%d level=%d", ty, s.rows, s.cols, n, lvl)
				require.Equal(t, int64(n&^3*s.rows), ran, "%s: outputs from the four-row kernel", what)
				requireBits(t, want, got, s.rows, what)
			}
		}
	}
}

// TestAddNEON requires Add to sum whole 16-value steps in the arm64
// kernel (counted in addCalls) with addGeneric's bits, tails included.
func TestAddNEON(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 9))
	for _, n := range []int{1, 15, 16, 17, 40, 1000} {
		x, y := randF32(r, n), randF32(r, n)
		want := append([]float32(nil), x...)
		addGeneric(want, y)
		for _, lvl := range supportedLevels()[1:] {
			saved := simdLevel()
			setSIMDLevel(lvl)
			got := append([]float32(nil), x...)
			before := addCalls.Load()
			Add(got, y)
			ran := addCalls.Load() - before
			setSIMDLevel(saved)
			require.Equal(t, int64(n&^15), ran, "n=%d level=%d: values through the arm64 kernel", n, lvl)
			requireBits(t, want, got, 1, fmt.Sprintf("n=%d level=%d", n, lvl))
		}
	}
}
