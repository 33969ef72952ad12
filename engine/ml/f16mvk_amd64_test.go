//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemvF16LongBits checks that the K-blocked four-row F16 matvec gives
// the one-row kernel's bits over one and several K blocks (even and
// uneven splits), whole and partial row groups, leftover rows, the
// masked tail, prefetch distances past the group and row strides wider
// than the row.
func TestGemvF16LongBits(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	defer func(rows, k, pf int) {
		f16LongRows, f16LongK, f16LongPfBytes = rows, k, pf
	}(f16LongRows, f16LongK, f16LongPfBytes)
	cases := []struct{ rows, k, pad, group, blockK int }{
		{8, 5, 0, 16, 4096}, {8, 16, 0, 4, 64}, {20, 333, 16, 16, 64},
		{9, 1000, 0, 4, 128}, {37, 2048 + 48 + 7, 0, 16, 512},
		{40, 14336, 0, 32, 4096}, {17, 14336 + 9, 32, 8, 6000},
		{5, 300, 0, 64, 64}, {44, 4096, 0, 16, 6144}, {3, 700, 0, 16, 128},
		{12, 64, 0, 1, 64}, {64, 2048, 0, 100, 4096},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d+%d/%d/%d", c.rows, c.k, c.pad, c.group, c.blockK), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.k)))
			ws := 2*c.k + c.pad
			w := randF16Rows(r, c.rows, c.k, ws)
			x := randF32(r, c.k)
			want := make([]float32, c.rows)
			got := make([]float32, c.rows)
			gemvF16x1(&x[0], &w[0], ws, c.k, &want[0], c.rows)
			f16LongRows, f16LongK = c.group, c.blockK
			for _, pf := range []int{0, 8192, 1 << 20} {
				f16LongPfBytes = pf
				clear(got)
				gemvF16Long(&x[0], w, ws, c.k, got, c.rows)
				requireBits(t, want, got, c.rows, fmt.Sprintf("gemvF16Long (prefetch %d) vs gemvF16x1", pf))
				require.NotZero(t, got[0])
			}
		})
	}
}

// BenchmarkF16Kernels compares the AVX-512 one-row F16 kernels on one
// core over the 8B and TinyLlama F16 shapes (weights on 2 MiB pages, above
// the L3) and one in L2: gemvF16x8, gemvF16x1, gemvF16Long and
// gemvF16Long without its prefetch, timed alternately in each iteration.
// It reports each one's median weight GB per thread-CPU-second and the
// median of its per-iteration ratio to gemvF16x8 (x_<name>): on a shared
// machine the ratios are steadier than the rates.
//
//	go test -run '^$' -bench F16Kernels -benchtime 16x ./engine/ml/
func BenchmarkF16Kernels(b *testing.B) {
	if !useAVX512 {
		b.Skip("no AVX-512")
	}
	type kernel func(x []float32, w []byte, ws, k int, dst []float32, nw int)
	kernels := []struct {
		name string
		run  kernel
	}{
		{"x8", func(x []float32, w []byte, ws, k int, dst []float32, nw int) {
			gemvF16x8(&x[0], &w[0], ws, k, &dst[0], nw)
		}},
		{"x1", func(x []float32, w []byte, ws, k int, dst []float32, nw int) {
			gemvF16x1(&x[0], &w[0], ws, k, &dst[0], nw)
		}},
		{"long", func(x []float32, w []byte, ws, k int, dst []float32, nw int) { gemvF16Long(&x[0], w, ws, k, dst, nw) }},
		{"long_nopf", func(x []float32, w []byte, ws, k int, dst []float32, nw int) {
			s := f16LongPfBytes
			f16LongPfBytes = 0
			gemvF16Long(&x[0], w, ws, k, dst, nw)
			f16LongPfBytes = s
		}},
	}
	for _, c := range [][2]int{{4096, 14336}, {14336, 4096}, {2048, 5632}, {32000, 2048}, {64, 4096}} {
		rows, cols := c[0], c[1]
		b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, uint64(rows)))
			data := randBlocks(r, F16, rows*cols)
			for i := 0; i < len(data); i += 2 {
				data[i+1] = data[i+1]&0x83 | 0x20 // finite, normal
			}
			hb, err := hugeAlloc((len(data) + 2<<20 - 1) &^ (2<<20 - 1))
			if err != nil {
				b.Fatal(err)
			}
			data = append(hb[:0], data...)
			x := randF32(r, cols)
			dst := make([]float32, rows)
			reps := 1
			if len(data) < 1<<20 {
				reps = 64
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rates := make([][]float64, len(kernels))
			for range b.N {
				for i, kn := range kernels {
					t0 := threadCPU()
					for range reps {
						kn.run(x, data, 2*cols, cols, dst, rows)
					}
					rates[i] = append(rates[i], float64(reps*len(data))/(threadCPU()-t0)/1e9)
				}
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			for i, kn := range kernels {
				rel := make([]float64, len(rates[i]))
				for j := range rel {
					rel[j] = rates[i][j] / rates[0][j]
				}
				b.ReportMetric(med(rel), "x_"+kn.name)
				b.ReportMetric(med(rates[i]), kn.name+"-cpu-GB/s")
			}
		})
	}
}
