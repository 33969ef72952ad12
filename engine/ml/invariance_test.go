package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulBatchInvariance requires MatMul's output for an activation row
// to be bitwise identical whatever the batch size, the row's position in
// the batch and the thread count, for every weight type and SIMD level.
// Integer products (Q8_0, the other quantized types) must also agree
// across levels.
func TestMatMulBatchInvariance(t *testing.T) {
	defer SetThreads(0)
	const n = 37
	type shape struct{ rows, cols int }
	shapes := map[Type][]shape{
		F32:  {{50, 100}, {300, 768}},
		F16:  {{50, 100}, {300, 768}},
		BF16: {{50, 100}, {300, 768}},
		Q8_0: {{50, 288}, {300, 768}},
		Q4_0: {{50, 288}},
		Q6_K: {{21, 512}, {70, 768}},
		Q2_K: {{21, 512}, {70, 768}},
		Q3_K: {{21, 512}, {70, 768}},
	}
	for _, ty := range SupportedTypes() {
		if _, ok := shapes[ty]; !ok {
			shapes[ty] = []shape{{50, 288}}
			if ty.BlockSize() == 256 {
				shapes[ty] = []shape{{21, 512}}
			}
		}
		for _, s := range shapes[ty] {
			r := rand.New(rand.NewPCG(uint64(ty), uint64(s.rows)))
			w := randMatrix(t, r, ty, s.rows, s.cols)
			x := randF32(r, n*s.cols)
			var firstLevel []float32
			for _, lvl := range supportedLevels() {
				saved := simdLevel()
				setSIMDLevel(lvl)
				var ref []float32
				for _, threads := range []int{1, 2, 3} {
					SetThreads(threads)
					name := fmt.Sprintf("%v %dx%d level=%d threads=%d", ty, s.rows, s.cols, lvl, threads)
					full := make([]float32, n*s.rows)
					MatMul(full, x, n, w)
					if ref == nil {
						ref = full
					}
					requireBits(t, ref, full, s.rows, name+" full batch vs threads=1")
					// Row by row.
					one := make([]float32, s.rows)
					for i := 0; i < n; i++ {
						MatMul(one, x[i*s.cols:(i+1)*s.cols], 1, w)
						requireBits(t, ref[i*s.rows:(i+1)*s.rows], one, s.rows, fmt.Sprintf("%s row %d alone", name, i))
					}
					// Shuffled subsets of random sizes.
					perm := r.Perm(n)
					for lo := 0; lo < n; {
						m := min(n-lo, 1+r.IntN(12))
						sub := make([]float32, m*s.cols)
						for j := 0; j < m; j++ {
							copy(sub[j*s.cols:], x[perm[lo+j]*s.cols:(perm[lo+j]+1)*s.cols])
						}
						out := make([]float32, m*s.rows)
						MatMul(out, sub, m, w)
						for j := 0; j < m; j++ {
							i := perm[lo+j]
							requireBits(t, ref[i*s.rows:(i+1)*s.rows], out[j*s.rows:(j+1)*s.rows], s.rows,
								fmt.Sprintf("%s row %d at %d of a shuffled batch of %d", name, i, j, m))
						}
						lo += m
					}
				}
				setSIMDLevel(saved)
				if ty.traits().act != actF32 {
					if firstLevel == nil {
						firstLevel = ref
					}
					requireBits(t, firstLevel, ref, s.rows, fmt.Sprintf("%v %dx%d level %d vs level %d", ty, s.rows, s.cols, lvl, supportedLevels()[0]))
				}
			}
		}
	}
}

func requireBits(t *testing.T, want, got []float32, rows int, what string) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s: output [%d][%d] = %v (%#08x), want %v (%#08x)", what, i/rows, i%rows,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestQ8Accuracy bounds the integer Q8_0 product against the f32 product
// over the dequantized weights: the activation quantization adds at most
// half a step (max|x|/254) per element.
func TestQ8Accuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const rows, cols, n = 256, 768, 8
	w := randMatrix(t, r, Q8_0, rows, cols)
	x := randF32(r, n*cols)
	// The f32 product over the dequantized weights and f32 activations.
	want := make([]float64, n*rows)
	row := make([]float32, cols)
	for r := 0; r < rows; r++ {
		Dequantize(row, w, r)
		for i := 0; i < n; i++ {
			var s float64
			for j, v := range row {
				s += float64(v) * float64(x[i*cols+j])
			}
			want[i*rows+r] = s
		}
	}
	got := make([]float32, n*rows)
	MatMul(got, x, n, w)
	var maxAbs, maxRel, sumSq, refSq float64
	for i, v := range got {
		d := math.Abs(float64(v) - want[i])
		maxAbs = max(maxAbs, d)
		sumSq += d * d
		refSq += want[i] * want[i]
	}
	maxRel = maxAbs / math.Sqrt(refSq/float64(len(got)))
	t.Logf("Q8_0 integer product vs f32 over dequantized weights: max abs err %.4g, max err / rms output %.4g, rms rel err %.4g",
		maxAbs, maxRel, math.Sqrt(sumSq/refSq))
	if math.Sqrt(sumSq/refSq) > 0.01 {
		t.Fatalf("rms relative error %.4g > 1%%", math.Sqrt(sumSq/refSq))
	}
}

// TestQ8Levels requires the Q8_0 kernels of every SIMD level (AVX-512
// VNNI, AVX2 with int16 products, plain Go) to give bitwise the reference
// arithmetic of dotQ8Generic, on weights that use the whole int8 range
// (-128 included, where a saturating VPMADDUBSW would be wrong) and on
// activations quantized to ±127 throughout.
func TestQ8Levels(t *testing.T) {
	defer SetThreads(0)
	r := rand.New(rand.NewPCG(41, 42))
	const rows, cols = 45, 320
	nb := cols / 32
	data := make([]byte, rows*nb*34)
	for b := 0; b < rows*nb; b++ {
		blk := data[b*34 : b*34+34]
		binary.LittleEndian.PutUint16(blk, F32ToF16(float32(r.Float64()*0.02)))
		for j := 2; j < 34; j++ {
			switch r.IntN(4) {
			case 0:
				blk[j] = 0x80 // -128
			case 1:
				blk[j] = 0x7f
			default:
				blk[j] = byte(r.Uint32())
			}
		}
	}
	w, err := NewMatrix(Q8_0, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 5, 9, 17} {
		x := randF32(r, n*cols)
		for i := range x {
			if r.IntN(3) == 0 {
				x[i] = float32(1 - 2*r.IntN(2)) // ±max: q = ±127
			} else {
				x[i] *= 0.3
			}
		}
		act := make([]byte, n*nb*q8ActBlock)
		want := make([]float32, n*rows)
		for i := 0; i < n; i++ {
			a := act[i*nb*q8ActBlock : (i+1)*nb*q8ActBlock]
			quantizeActQ8Generic(a, x[i*cols:(i+1)*cols])
			for o := 0; o < rows; o++ {
				want[i*rows+o] = dotQ8Generic(data[o*nb*34:(o+1)*nb*34], a, nb)
			}
		}
		for _, lvl := range supportedLevels() {
			for _, threads := range []int{1, 2} {
				SetThreads(threads)
				saved := simdLevel()
				setSIMDLevel(lvl)
				got := make([]float32, n*rows)
				MatMul(got, x, n, w)
				setSIMDLevel(saved)
				requireBits(t, want, got, rows, fmt.Sprintf("Q8_0 n=%d level=%d threads=%d", n, lvl, threads))
			}
		}
	}
}
