package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU returns this OS thread's CPU time in seconds. Single-threaded
// kernel benchmarks divide by it rather than wall time so that a busy
// shared machine (time slices lost to other processes) does not distort
// the compute rate.
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

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

// BenchmarkKernelGEMM times single-threaded n=32 products on a 512x768
// matrix (weights in L2): the micro-kernel's compute rate.
func BenchmarkKernelGEMM(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16} {
		for _, n := range []int{8, 32} {
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
