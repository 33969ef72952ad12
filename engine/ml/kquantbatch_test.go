package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKQuantBatchMatchGeneric requires the batched K-quant products (n >= 4
// activation rows, where AVX-512 VNNI sweeps expanded 16-row tiles) to
// equal the reference arithmetic bit for bit at every SIMD level: every n
// from 4 to 40 (remainders of the eight- and four-row kernels), row counts
// around the tile size, several widths, one and two threads (a thread's
// rows need not start on a tile boundary), and extreme blocks.
func TestKQuantBatchMatchGeneric(t *testing.T) {
	defer SetThreads(0)
	r := rand.New(rand.NewPCG(41, 42))
	shapes := []struct{ rows, cols int }{{1, 256}, {15, 512}, {16, 768}, {17, 256}, {33, 2048}, {40, 768}}
	for _, ty := range []Type{Q4_K, Q5_K, Q6_K} {
		for _, s := range shapes {
			for _, mode := range []string{"random", "extreme", "large"} {
				w := randMatrix(t, r, ty, s.rows, s.cols)
				if mode != "random" {
					extremeKBlocks(w, mode == "large")
				}
				rb, _ := ty.RowBytes(s.cols)
				as := s.cols / 256 * q8KActBlock
				for n := 4; n <= 40; n++ {
					if s.cols == 2048 && n%4 != 1 && n != 8 && n != 40 {
						continue // the widest shape at a few counts only
					}
					x := randF32(r, n*s.cols)
					if mode != "random" {
						// Quantized to +-127 (and -128 nowhere).
						for i := range x {
							x[i] = float32(1 - 2*(i*7/5&1))
						}
					}
					act := make([]byte, n*as)
					for i := 0; i < n; i++ {
						quantizeActQ8KGeneric(act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
					}
					want := make([]float32, n*s.rows)
					matmulIntGeneric(want, act, n, w, rb, 0, s.rows)
					for _, threads := range []int{1, 2} {
						SetThreads(threads)
						for _, lvl := range supportedLevels() {
							saved := simdLevel()
							setSIMDLevel(lvl)
							got := make([]float32, n*s.rows)
							MatMul(got, x, n, w)
							setSIMDLevel(saved)
							requireBits(t, want, got, s.rows, fmt.Sprintf("%v %dx%d n=%d %s threads=%d level=%d",
								ty, s.rows, s.cols, n, mode, threads, lvl))
						}
					}
				}
			}
		}
	}
}

// extremeKBlocks sets every value and scale of w's blocks to its largest
// magnitude: Q4_K and Q5_K values 15 and 31 with scales and mins 63, Q6_K
// values -32 with scales -128; d and dmin 1, or with large the largest
// finite f16.
func extremeKBlocks(w *Matrix, large bool) {
	bs := w.Type.BlockBytes()
	f := F32ToF16(1)
	if large {
		f = 0x7bff // 65504
	}
	for b := 0; b < len(w.Data); b += bs {
		blk := w.Data[b : b+bs]
		switch w.Type {
		case Q4_K, Q5_K:
			for i := range blk {
				blk[i] = 0xff
			}
			binary.LittleEndian.PutUint16(blk[0:], f)
			binary.LittleEndian.PutUint16(blk[2:], f)
		case Q6_K:
			clear(blk[:192])
			for i := 192; i < 208; i++ {
				blk[i] = 0x80
			}
			binary.LittleEndian.PutUint16(blk[208:], f)
		}
	}
}

// quantizeActGeneric is quantizeAct with the reference encoders, for the
// expected outputs of tests that run the SIMD ones through MatMul.
func quantizeActGeneric(f actFormat, dst []byte, x []float32) {
	if f == actQ8K {
		quantizeActQ8KGeneric(dst, x)
		return
	}
	quantizeActQ8Generic(dst, x)
}

// TestQuantizeActQ8KMatchesGeneric requires the SIMD Q8_K encoder to give
// the reference bytes: random rows, the largest magnitude first with
// either sign and tied with the opposite sign, all-zero and signed-zero
// blocks, NaNs (ignored for the maximum, encoded 0), infinities, values
// that round to exactly .5 steps, and subnormals.
func TestQuantizeActQ8KMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	const nb = 6
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for trial := 0; trial < 200; trial++ {
		x := randF32(r, nb*256)
		for b := 0; b < nb; b++ {
			blk := x[b*256 : (b+1)*256]
			switch (trial + b) % 8 {
			case 1: // ties of opposite sign; the first decides the sign
				i, j := r.IntN(256), r.IntN(256)
				blk[i], blk[j] = 9, -9
			case 2:
				clear(blk)
			case 3:
				for i := range blk {
					blk[i] = float32(math.Copysign(0, float64(1-2*(i&1))))
				}
			case 4:
				blk[r.IntN(256)] = nan
			case 5:
				blk[r.IntN(256)] = -inf
			case 6: // steps landing on halves: max 127, values k+0.5
				for i := range blk {
					blk[i] = float32(r.IntN(254)-127) + 0.5
				}
				blk[r.IntN(256)] = -127
			case 7:
				for i := range blk {
					blk[i] *= 1e-42
				}
			}
		}
		want := make([]byte, nb*q8KActBlock)
		got := make([]byte, nb*q8KActBlock)
		quantizeActQ8KGeneric(want, x)
		for i := range got {
			got[i] = 0xa5
		}
		quantizeActQ8K(got, x)
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("trial %d: byte %d (block %d, offset %d) = %#x, want %#x",
					trial, i, i/q8KActBlock, i%q8KActBlock, got[i], want[i])
			}
		}
	}
}
