package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestKQuantKernelsMatchGeneric requires every SIMD level's K-quant
// product to equal the reference arithmetic bit for bit, for matvecs and
// batches of every remainder, at row counts that are not multiples of
// four, and with extreme weights (all nibbles 15, largest scales).
func TestKQuantKernelsMatchGeneric(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	r := rand.New(rand.NewPCG(7, 8))
	for _, ty := range []Type{Q4_0, Q5_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_1, Q5_1, IQ4_XS} {
		// 19x288: nine 32-value blocks a row, an odd count (the one-row
		// kernels of Q4_0 and IQ4_NL take two a step); K-quants skip it.
		for _, s := range []struct{ rows, cols int }{{1, 256}, {3, 512}, {6, 256}, {15, 512}, {16, 2048}, {17, 768}, {33, 768}, {37, 512}, {37, 1024}, {40, 256}, {19, 288}} {
			if s.cols%ty.BlockSize() != 0 {
				continue
			}
			for _, extreme := range []bool{false, true} {
				w := randMatrix(t, r, ty, s.rows, s.cols)
				if extreme {
					bs := ty.BlockBytes()
					for b := 0; b < len(w.Data); b += bs {
						for i := 0; i < bs; i++ {
							w.Data[b+i] = 0xff
						}
						switch ty {
						case Q4_0, Q5_0, IQ4_NL:
							w.Data[b], w.Data[b+1] = 0x00, 0x3c
						case Q4_K, Q5_K, Q4_1, Q5_1:
							w.Data[b], w.Data[b+1], w.Data[b+2], w.Data[b+3] = 0x00, 0x3c, 0x00, 0x3c // d = dmin (m) = 1
						case Q2_K:
							w.Data[b+80], w.Data[b+81], w.Data[b+82], w.Data[b+83] = 0x00, 0x3c, 0x00, 0x3c
						case Q3_K:
							// Every value -4 (low bits and hmask bits
							// clear) and every scale -32.
							clear(w.Data[b : b+108])
							w.Data[b+108], w.Data[b+109] = 0x00, 0x3c
						case IQ4_XS:
							w.Data[b], w.Data[b+1] = 0x00, 0x3c // d = 1, scales 31
							if b/bs%2 == 1 {
								// Code -127 (the sign trick's widest
								// product) at scale -32.
								for i := 2; i < bs; i++ {
									w.Data[b+i] = 0
								}
							}
						case Q6_K:
							for i := 192; i < 208; i++ {
								w.Data[b+i] = 0x80 // scale -128
							}
							w.Data[b+208], w.Data[b+209] = 0x00, 0x3c
						}
					}
				}
				for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9} {
					x := randF32(r, n*s.cols)
					if extreme {
						for i := range x {
							x[i] = float32(1 - 2*(i&1))
						}
					}
					rb, _ := ty.RowBytes(s.cols)
					tr := ty.traits()
					as := s.cols / tr.act.blockSize() * tr.act.blockBytes()
					act := make([]byte, n*as)
					for i := 0; i < n; i++ {
						quantizeActGeneric(tr.act, act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
					}
					want := make([]float32, n*s.rows)
					matmulIntGeneric(want, act, n, w, rb, 0, s.rows)
					for _, lvl := range supportedLevels() {
						saved := simdLevel()
						setSIMDLevel(lvl)
						got := make([]float32, n*s.rows)
						MatMul(got, x, n, w)
						setSIMDLevel(saved)
						requireBits(t, want, got, s.rows, fmt.Sprintf("%v %dx%d n=%d extreme=%v level=%d", ty, s.rows, s.cols, n, extreme, lvl))
					}
				}
			}
		}
	}
}

// BenchmarkKQuantLevels compares the SIMD levels of the K-quant and Q4_0
// kernels on a 2048x768 matrix (stories110M's FFN shape), one thread, for
// one activation row and for 32, and on a 768x768 one (its attention
// shape) for 32. Reports multiply-adds per second.
func BenchmarkKQuantLevels(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	names := []string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}
	cases := []struct{ rows, cols, n int }{{2048, 768, 1}, {2048, 768, 32}, {768, 768, 32}}
	for _, ty := range []Type{Q4_0, Q5_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_1, Q5_1, IQ4_XS} {
		r := rand.New(rand.NewPCG(uint64(ty), 2))
		for _, c := range cases {
			rows, cols, n := c.rows, c.cols, c.n
			w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
			if err != nil {
				b.Fatal(err)
			}
			shape := ""
			if rows != 2048 {
				shape = fmt.Sprintf("/%dx%d", rows, cols)
			}
			x := randF32(r, n*cols)
			dst := make([]float32, n*rows)
			for _, lvl := range supportedLevels()[1:] {
				b.Run(fmt.Sprintf("%v/n=%d%s/%s", ty, n, shape, names[lvl]), func(b *testing.B) {
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
					macs := float64(b.N) * float64(rows*cols*n)
					b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
					b.ReportMetric(macs/(threadCPU()-cpu0)/1e9, "cpu-GMAC/s")
				})
			}
		}
	}
}
