package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// dequantActQ8K returns rows of k activations as the K-quant products see
// them.
func dequantActQ8K(x []float32, k int) []float32 {
	out := make([]float32, len(x))
	blk := make([]byte, k/256*kqActBlock)
	for i := 0; i < len(x)/k; i++ {
		quantizeActQ8KGeneric(blk, x[i*k:(i+1)*k])
		for b := 0; b < k/256; b++ {
			ab := blk[b*kqActBlock : (b+1)*kqActBlock]
			d := actScale(ab)
			for j := 0; j < 256; j++ {
				out[i*k+b*256+j] = float32(int8(ab[j])) * d
			}
		}
	}
	return out
}

// TestQuantizeActQ8K checks the activation blocks: values within half a
// step, and the sums of 16 and of 32 values.
func TestQuantizeActQ8K(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := randF32(r, 512)
	x[7] = 0 // an exact zero stays zero
	for i := 256; i < 512; i++ {
		x[i] = 0 // an all-zero block has scale 0
	}
	blk := make([]byte, 2*kqActBlock)
	quantizeActQ8KGeneric(blk, x)
	a := blk[:kqActBlock]
	d := actScale(a)
	require.Greater(t, d, float32(0))
	for j := 0; j < 256; j++ {
		require.InDelta(t, x[j], float32(int8(a[j]))*d, float64(d)/2+1e-7)
	}
	require.Equal(t, byte(0), a[7])
	for j := 0; j < 16; j++ {
		var s int
		for l := 0; l < 16; l++ {
			s += int(int8(a[16*j+l]))
		}
		require.Equal(t, s, int(int16(uint16(a[kqActSums16+2*j])|uint16(a[kqActSums16+2*j+1])<<8)))
	}
	for j := 0; j < 8; j++ {
		var s int
		for l := 0; l < 32; l++ {
			s += int(int8(a[32*j+l]))
		}
		require.Equal(t, s, int(int16(uint16(a[kqActSums32+2*j])|uint16(a[kqActSums32+2*j+1])<<8)))
	}
	require.Equal(t, float32(0), actScale(blk[kqActBlock:]))
}

// TestKQuantKernelsMatchGeneric requires every SIMD level's K-quant
// product to equal the reference arithmetic bit for bit, for matvecs and
// batches of every remainder, at row counts that are not multiples of
// four, and with extreme weights (all nibbles 15, largest scales).
func TestKQuantKernelsMatchGeneric(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	r := rand.New(rand.NewPCG(7, 8))
	for _, ty := range []Type{Q4_K, Q6_K} {
		for _, s := range []struct{ rows, cols int }{{1, 256}, {3, 512}, {6, 256}, {17, 768}} {
			for _, extreme := range []bool{false, true} {
				w := randMatrix(t, r, ty, s.rows, s.cols)
				if extreme {
					bs := ty.BlockBytes()
					for b := 0; b < len(w.Data); b += bs {
						for i := 0; i < bs; i++ {
							w.Data[b+i] = 0xff
						}
						if ty == Q4_K {
							w.Data[b], w.Data[b+1], w.Data[b+2], w.Data[b+3] = 0x00, 0x3c, 0x00, 0x3c // d = dmin = 1
						} else {
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
					as := s.cols / 256 * kqActBlock
					act := make([]byte, n*as)
					for i := 0; i < n; i++ {
						quantizeActQ8KGeneric(act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
					}
					want := make([]float32, n*s.rows)
					matmulKGeneric(want, act, n, w, rb, 0, s.rows)
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

// TestKQuantAccuracy bounds the integer K-quant product against the f32
// product over the dequantized weights and unquantized activations.
func TestKQuantAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const rows, cols, n = 64, 768, 4
	for _, ty := range []Type{Q4_K, Q6_K} {
		w := randMatrix(t, r, ty, rows, cols)
		x := randF32(r, n*cols)
		got := make([]float32, n*rows)
		MatMul(got, x, n, w)
		row := make([]float32, cols)
		for i := 0; i < rows; i++ {
			Dequantize(row, w, i)
			var amaxW float64
			for _, v := range row {
				amaxW = max(amaxW, math.Abs(float64(v)))
			}
			for a := 0; a < n; a++ {
				var s, amaxX float64
				for j, v := range row {
					s += float64(v) * float64(x[a*cols+j])
					amaxX = max(amaxX, math.Abs(float64(x[a*cols+j])))
				}
				// Half a step of max|x|/127 per element, at most.
				bound := float64(cols)*amaxW*amaxX/254 + 1e-3*math.Abs(s)
				require.InDelta(t, s, float64(got[a*rows+i]), bound, "%v row %d act %d", ty, i, a)
			}
		}
	}
}
