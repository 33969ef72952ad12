//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkBF16Micro times the 4x4 block kernels on L1-resident rows.
func BenchmarkBF16Micro(b *testing.B) {
	const k = 768
	x := make([]byte, 4*2*k)
	w := make([]byte, 16*2*k)
	quantizeActBF16Generic(w, randF32(rand.New(rand.NewPCG(1, 2)), 16*k))
	quantizeActBF16Generic(x, randF32(rand.New(rand.NewPCG(1, 3)), 4*k))
	d := make([]float32, 4*16)
	for _, c := range []struct {
		name string
		f    func(x *byte, xs int, w *byte, ws int, k int, dst *float32, ds int, nw int)
	}{{"native", bf16Dot4x4}, {"emu", bf16Dot4x4Emu}} {
		b.Run(c.name, func(b *testing.B) {
			kernelBench(b, 2*4*16*k/1e9, "GFLOP/s", func() { c.f(&x[0], 2*k, &w[0], 2*k, k, &d[0], 16, 16) })
		})
	}
}

// BenchmarkBF16Variants is BenchmarkKernelGEMM's BF16 cases with the
// VDPBF16PS kernels and with their FMA emulation.
func BenchmarkBF16Variants(b *testing.B) {
	for _, n := range []int{1, 32, 128} {
		for _, v := range bf16Variants() {
			b.Run(fmt.Sprintf("n=%d/%s", n, v.name), func(b *testing.B) {
				const rows, cols = 512, 768
				r := rand.New(rand.NewPCG(1, 2))
				m, _ := Quantize(BF16, rows, cols, randF32(r, rows*cols))
				x := randF32(r, n*cols)
				dst := make([]float32, n*rows)
				v.set()
				defer v.restore()
				kernelBench(b, 2*rows*cols*float64(n)/1e9, "GFLOP/s", func() { MatMul(dst, x, n, m) })
			})
		}
	}
}

// BenchmarkBF16AVX2Block times a prefill-shaped BF16 product on AVX2 with
// the one-row kernel for every activation row ("rows") and with the 2x4
// block kernel ("block"), one thread.
func BenchmarkBF16AVX2Block(b *testing.B) {
	const rows, cols, n = 512, 2048, 64
	r := rand.New(rand.NewPCG(1, 2))
	m, err := Quantize(BF16, rows, cols, randF32(r, rows*cols))
	if err != nil {
		b.Fatal(err)
	}
	act := make([]byte, n*2*cols)
	quantizeActBF16Generic(act, randF32(r, n*cols))
	dst := make([]float32, n*rows)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"rows", func() { matmulBF16Lanes(dst, act, n, m, 2*cols, 0, rows, bf16LanesAVX2) }},
		{"block", func() { matmulBF16AVX2(dst, act, n, m, 2*cols, 0, rows) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			kernelBench(b, 2*rows*cols*n/1e9, "GFLOP/s", c.f)
		})
	}
}
