package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// BenchmarkMatVecCore measures how fast one core streams weights through
// the one-row (matvec) kernels on the 8B model's matrix shapes, all well
// above the L3 cache: weight GB per thread-CPU-second (cpu-GB/s), next to
// the same thread's streaming-read rate with the SIMD sum kernel over a
// 256 MiB buffer (sum-cpu-GB/s), timed alternately in each iteration; the
// medians are reported and of_read is their ratio. A kernel at of_read
// near 1 is bound by the core's reads, not its instructions. Weights are
// on 2 MiB pages (as a mapped weight file whose page cache is in 2 MiB
// folios is). Thread CPU time, not wall time: on a shared machine the time
// slices other processes take do not count.
//
//	go test -run '^$' -bench MatVecCore -benchtime 10x ./engine/ml/
func BenchmarkMatVecCore(b *testing.B) {
	cases := []struct {
		t          Type
		rows, cols int
	}{
		// Cache-resident (about 300-600 KB, in L2): the kernels' compute
		// rate without DRAM.
		{Q4_K, 128, 4096}, {Q5_K, 128, 4096}, {Q6_K, 128, 4096}, {Q8_0, 128, 4096},
		{IQ4_XS, 128, 4096}, {F16, 64, 4096}, {BF16, 64, 4096},
		{MXFP4, 256, 2880},

		{Q4_K, 14336, 4096}, {Q4_K, 4096, 14336},
		{Q5_K, 14336, 4096}, {Q5_K, 4096, 14336},
		{Q6_K, 4096, 14336}, {Q6_K, 128256, 4096},
		{Q8_0, 14336, 4096}, {Q8_0, 4096, 14336},
		{IQ4_XS, 14336, 4096}, {IQ4_XS, 4096, 14336},
		{F16, 14336, 4096}, {F16, 4096, 14336}, {BF16, 14336, 4096},
		// TinyLlama-1.1B's F16 matrices: 4 KB rows (ffn gate/up, output) and
		// 11 KB rows (ffn down).
		{F16, 5632, 2048}, {F16, 2048, 5632}, {F16, 32000, 2048},
		{BF16, 5632, 2048}, {BF16, 2048, 5632}, {BF16, 4096, 14336},
		// gpt-oss-20b's experts are 2880x2880 MXFP4 (gate, up and down
		// alike, gate and up not fused); 16 of them stacked (70 MB) is a
		// set above the L3 with the same per-tile work.
		{MXFP4, 16 * 2880, 2880},
	}
	buf := make([]float32, 1<<26) // 256 MiB
	for i := range buf {
		buf[i] = float32(i & 1023)
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%v/%dx%d", c.t, c.rows, c.cols), func(b *testing.B) {
			if !useSIMD() {
				b.Skip("no SIMD")
			}
			r := rand.New(rand.NewPCG(uint64(c.t), uint64(c.rows)))
			data := randBlocks(r, c.t, c.rows*c.cols/c.t.BlockSize())
			if c.t == F16 || c.t == BF16 {
				// Finite, normal values (no NaN, no subnormals).
				for i := 0; i < len(data); i += 2 {
					data[i+1] = data[i+1]&0x83 | 0x20
				}
			}
			hb, err := hugeAlloc((len(data) + 2<<20 - 1) &^ (2<<20 - 1))
			if err != nil {
				b.Fatal(err)
			}
			data = append(hb[:0], data...)
			m, err := NewMatrix(c.t, c.rows, c.cols, data)
			if err != nil {
				b.Fatal(err)
			}
			x := randF32(r, c.cols)
			dst := make([]float32, c.rows)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			SetThreads(1)
			defer SetThreads(0)
			MatMul(dst, x, 1, m)
			reps := 1
			if len(m.Data) < 1<<20 {
				reps = 64
			}
			// old, where set, switches to the previous kernel for an
			// alternating A/B in the same run (old-cpu-GB/s).
			old := matVecCoreOld[c.t]
			var kr, sr, or []float64
			b.ResetTimer()
			for range b.N {
				t0 := threadCPU()
				for range reps {
					MatMul(dst, x, 1, m)
				}
				t1 := threadCPU()
				sumSIMD(buf)
				t2 := threadCPU()
				kr = append(kr, float64(reps*len(m.Data))/(t1-t0)/1e9)
				sr = append(sr, float64(len(buf)*4)/(t2-t1)/1e9)
				if old != nil {
					restore := old()
					t0 := threadCPU()
					for range reps {
						MatMul(dst, x, 1, m)
					}
					or = append(or, float64(reps*len(m.Data))/(threadCPU()-t0)/1e9)
					restore()
				}
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			k, s := med(kr), med(sr)
			b.ReportMetric(k, "cpu-GB/s")
			b.ReportMetric(s, "sum-cpu-GB/s")
			b.ReportMetric(k/s, "of_read")
			if old != nil {
				b.ReportMetric(med(or), "old-cpu-GB/s")
			}
		})
	}
}
