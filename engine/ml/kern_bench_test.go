package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// kernelBench runs f b.N times single-threaded on a locked OS thread and
// reports work/s by wall time and by thread CPU time.
func kernelBench(b *testing.B, work float64, unit string, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	SetThreads(1)
	defer SetThreads(0)
	f()
	b.ResetTimer()
	c0 := threadCPU()
	for range b.N {
		f()
	}
	cpu := threadCPU() - c0
	b.ReportMetric(work*float64(b.N)/b.Elapsed().Seconds(), unit)
	if cpu > 0 {
		b.ReportMetric(work*float64(b.N)/cpu, "cpu-"+unit)
	}
}

// BenchmarkKernelL2 times single-threaded n=1 products on one cache-resident
// 256x768 matrix: the kernels' compute speed without DRAM.
func BenchmarkKernelL2(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16} {
		b.Run(t.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			m, _ := Quantize(t, 256, 768, randF32(r, 256*768))
			x := randF32(r, 768)
			dst := make([]float32, 256)
			kernelBench(b, float64(len(m.Data))/1e9, "GB/s", func() { MatMul(dst, x, 1, m) })
		})
	}
}

// BenchmarkKernelGEMM times single-threaded n=8, 32 and 128 products on a
// 512x768 matrix (weights in L2): the micro-kernel's compute rate (n=128
// is a prefill chunk's shape; BF16 against F16 for issue 30).
func BenchmarkKernelGEMM(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16, BF16} {
		for _, n := range []int{8, 32, 128} {
			b.Run(fmt.Sprintf("%v/n=%d", t, n), func(b *testing.B) {
				const rows, cols = 512, 768
				r := rand.New(rand.NewPCG(1, 2))
				m, _ := Quantize(t, rows, cols, randF32(r, rows*cols))
				x := randF32(r, n*cols)
				dst := make([]float32, n*rows)
				kernelBench(b, 2*rows*cols*float64(n)/1e9, "GFLOP/s", func() { MatMul(dst, x, n, m) })
			})
		}
	}
}

// BenchmarkMatVecCPU streams the stories110M per-token weight set with n=1
// products on one locked thread and reports GB/s by thread CPU time (time
// slices lost to other processes on a shared machine do not count), next
// to the same thread's read bandwidth with the SIMD sum kernel.
func BenchmarkMatVecCPU(b *testing.B) {
	for _, t := range []Type{Q8_0, F16, F32} {
		b.Run(t.String(), func(b *testing.B) {
			forEachPath(b, func(b *testing.B) {
				if simdLevel() == levelGeneric {
					b.Skip("generic")
				}
				s := stories110M(b, t)
				x := randF32(rand.New(rand.NewPCG(2, 3)), bHidden)
				dst := make([]float32, bVocab)
				kernelBench(b, float64(s.bytes)/1e9, "GB/s", func() {
					for _, m := range s.mats {
						MatMul(dst[:m.Rows], x[:m.Cols], 1, m)
					}
				})
			})
		})
	}
	b.Run("sum", func(b *testing.B) {
		bwBufOnce.Do(func() {
			bwBuf = make([]float32, 1<<28)
			for i := range bwBuf {
				bwBuf[i] = float32(i & 1023)
			}
		})
		if !useSIMD() {
			b.Skip("no SIMD")
		}
		p := bwBuf[:1<<25] // 128 MiB, about the Q8_0 set
		kernelBench(b, float64(len(p)*4)/1e9, "GB/s", func() { sumSIMD(p) })
	})
}
