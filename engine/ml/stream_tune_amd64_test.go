//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// BenchmarkPrefetchTune runs the 1B Q4_K_M decode stream with each
// software-prefetch setting of the K-quant matvec (distance in bytes,
// instruction), interleaved round by
// round, and reports each setting's median speed relative to the current
// default measured in the same rounds (a ratio that a loaded machine
// disturbs far less than the absolute rates).
//
//	KVW_THREADS=2 go test -run '^$' -bench PrefetchTune -benchtime 10x ./engine/ml/
func BenchmarkPrefetchTune(b *testing.B) {
	vs := []prefetchVariant{
		{"default", kqPrefetchBytes, kqPrefetch}, {"off", 0, prefetchLines},
		{"L1-32K", 32 << 10, prefetchLines}, {"L2-8K", 8 << 10, prefetchLinesL2},
		{"L2-16K", 16 << 10, prefetchLinesL2}, {"L2-64K", 64 << 10, prefetchLinesL2},
	}
	for _, c := range []struct {
		name      string
		body, out Type
	}{{"Q4_K_M", Q4_K, Q6_K}, {"Q6_K", Q6_K, Q6_K}} {
		b.Run(c.name, func(b *testing.B) {
			savedBytes, savedFn := kqPrefetchBytes, kqPrefetch
			defer func() { kqPrefetchBytes, kqPrefetch = savedBytes, savedFn }()
			var tv []tuneVariant
			for _, v := range vs {
				tv = append(tv, tuneVariant{v.name, func() { kqPrefetchBytes, kqPrefetch = v.bytes, v.fn }, nil})
			}
			tuneRounds(b, tv, tinyLlamaSet(b, c.body, c.out, 22))
		})
	}
}

type prefetchVariant struct {
	name  string
	bytes int
	fn    func(*byte, int)
}

// tuneVariant is one setting: set applies it.
type tuneVariant struct {
	name string
	set  func()
	// s, when not nil, is the decode set this variant streams instead of
	// tuneRounds' own.
	s *decodeSet
}

// tuneRounds runs the decode stream of s once per variant per round,
// rotating the order, and reports each variant's median speed and CPU time
// relative to the first variant's in the same round, and its best rate.
func tuneRounds(b *testing.B, vs []tuneVariant, s *decodeSet) {
	x := randF32(rand.New(rand.NewPCG(1, 2)), 5632)
	q, k, v := make([]float32, 2048), make([]float32, 256), make([]float32, 256)
	o, g, u := make([]float32, 2048), make([]float32, 5632), make([]float32, 5632)
	logits := make([]float32, 32000)
	var cpu float64
	cur := s
	step := func() time.Duration {
		s := cur
		c0 := processCPU()
		defer func() { cpu = processCPU() - c0 }()
		t0 := time.Now()
		for _, l := range s.layers {
			MatMulGroup([][]float32{q, k, v}, x[:2048], 1, l[:3])
			MatMul(o, x[:2048], 1, l[3])
			MatMulGroup([][]float32{g, u}, x[:2048], 1, l[4:6])
			MatMul(o, x[:5632], 1, l[6])
		}
		MatMul(logits, x[:2048], 1, s.out)
		return time.Since(t0)
	}
	step()
	ratios := make([][]float64, len(vs))
	cpuRatios := make([][]float64, len(vs))
	best := make([]time.Duration, len(vs))
	b.ResetTimer()
	for i := range b.N {
		times := make([]time.Duration, len(vs))
		cpus := make([]float64, len(vs))
		for j := range vs {
			jj := (i + j) % len(vs)
			vs[jj].set()
			cur = s
			if vs[jj].s != nil {
				cur = vs[jj].s
			}
			times[jj] = step()
			cpus[jj] = cpu
			if best[jj] == 0 || times[jj] < best[jj] {
				best[jj] = times[jj]
			}
		}
		for j := range vs {
			ratios[j] = append(ratios[j], float64(times[0])/float64(times[j]))
			cpuRatios[j] = append(cpuRatios[j], cpus[0]/cpus[j])
		}
	}
	for j, v := range vs {
		sort.Float64s(ratios[j])
		sort.Float64s(cpuRatios[j])
		b.ReportMetric(ratios[j][len(ratios[j])/2], v.name+"-x")
		// CPU time (spinning included) ratio: what the setting saves in
		// work, which a loaded machine's lost time slices do not blur.
		b.ReportMetric(cpuRatios[j][len(cpuRatios[j])/2], v.name+"-cpu-x")
		b.ReportMetric(float64(s.bytes)/best[j].Seconds()/1e9, v.name+"-bestGB/s")
	}
}

// BenchmarkChunkTune is BenchmarkPrefetchTune for chunksPerThread.
//
//	KVW_THREADS=2 go test -run '^$' -bench ChunkTune -benchtime 10x ./engine/ml/
func BenchmarkChunkTune(b *testing.B) {
	saved := chunksPerThread
	defer func() { chunksPerThread = saved }()
	var vs []tuneVariant
	for _, c := range []int{saved, 1, 2, 8, 16} {
		vs = append(vs, tuneVariant{fmt.Sprint(c), func() { chunksPerThread = c }, nil})
	}
	tuneRounds(b, vs, tinyLlamaSet(b, Q4_K, Q6_K, 22))
}

// BenchmarkKernelPrefetchTune is BenchmarkPrefetchTune for the in-kernel
// prefetch distance of the 512-bit Q4_K/Q6_K kernels (kqPfDist), with and
// without matvecK's per-call prefetch for them too (kqZCallPrefetch).
//
//	KVW_THREADS=2 go test -run '^$' -bench KernelPrefetchTune -benchtime 10x ./engine/ml/
func BenchmarkKernelPrefetchTune(b *testing.B) {
	savedD, savedB := kqPfDist, kqZCallPrefetch
	defer func() { kqPfDist, kqZCallPrefetch = savedD, savedB }()
	var vs []tuneVariant
	for _, c := range []struct {
		dist int
		call bool
	}{
		{savedD, savedB}, {0, false}, {16 << 10, false}, {64 << 10, false}, {0, true}, {32 << 10, true},
	} {
		vs = append(vs, tuneVariant{fmt.Sprintf("k%dK-call=%v", c.dist>>10, c.call), func() { kqPfDist, kqZCallPrefetch = c.dist, c.call }, nil})
	}
	tuneRounds(b, vs, tinyLlamaSet(b, Q4_K, Q6_K, 22))
}

// BenchmarkKernel8Tune compares the eight-row Q4_K and Q6_K matvec kernels
// with the four-row ones on the 1B decode streams, interleaved round by
// round.
//
//	KVW_THREADS=2 go test -run '^$' -bench Kernel8Tune -benchtime 12x ./engine/ml/
func BenchmarkKernel8Tune(b *testing.B) {
	saved := kqQ4K8
	defer func() { kqQ4K8 = saved }()
	vs := []tuneVariant{{"rows4", func() { kqQ4K8 = false }, nil}, {"rows8", func() { kqQ4K8 = true }, nil}}
	b.Run("Q4_K_M", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q4_K, Q6_K, 22)) })
	b.Run("Q6_K", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q6_K, Q6_K, 22)) })
}

// BenchmarkGuidedTune compares guided self-scheduling of one-row products
// (guidedChunks) with equal chunks (chunksPerThread per thread) on the 1B
// decode streams, interleaved round by round.
//
//	KVW_THREADS=2 go test -run '^$' -bench GuidedTune -benchtime 12x ./engine/ml/
func BenchmarkGuidedTune(b *testing.B) {
	saved := guidedChunks
	defer func() { guidedChunks = saved }()
	vs := []tuneVariant{{"equal", func() { guidedChunks = false }, nil}, {"guided", func() { guidedChunks = true }, nil}}
	b.Run("Q4_K_M", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q4_K, Q6_K, 22)) })
	b.Run("Q6_K", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q6_K, Q6_K, 22)) })
}

// BenchmarkPfDistTune is BenchmarkKernelPrefetchTune over longer in-kernel
// distances only (run it with KVW_BENCH_HUGE=1 for weights on 2 MiB pages).
//
//	KVW_BENCH_HUGE=1 KVW_THREADS=2 go test -run '^$' -bench PfDistTune -benchtime 10x ./engine/ml/
func BenchmarkPfDistTune(b *testing.B) {
	saved := kqPfDist
	defer func() { kqPfDist = saved }()
	var vs []tuneVariant
	for _, d := range []int{saved, 48 << 10, 64 << 10, 96 << 10} {
		vs = append(vs, tuneVariant{fmt.Sprintf("k%dK", d>>10), func() { kqPfDist = d }, nil})
	}
	b.Run("Q4_K_M", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q4_K, Q6_K, 22)) })
	b.Run("Q6_K", func(b *testing.B) { tuneRounds(b, vs, tinyLlamaSet(b, Q6_K, Q6_K, 22)) })
}

// BenchmarkHugeTune streams the 1B decode set from the Go heap (4 KiB
// pages) and from memory advised for 2 MiB pages (as a weight file cached
// in 2 MiB folios is mapped), interleaved round by round; huge-x is the
// second's speed relative to the first's in the same rounds.
//
//	KVW_THREADS=2 go test -run '^$' -bench HugeTune -benchtime 12x ./engine/ml/
func BenchmarkHugeTune(b *testing.B) {
	for _, c := range []struct {
		name      string
		body, out Type
	}{{"Q4_K_M", Q4_K, Q6_K}, {"Q6_K", Q6_K, Q6_K}} {
		b.Run(c.name, func(b *testing.B) {
			b.Setenv("KVW_BENCH_HUGE", "0")
			small := tinyLlamaSet(b, c.body, c.out, 22)
			b.Setenv("KVW_BENCH_HUGE", "1")
			huge := tinyLlamaSet(b, c.body, c.out, 22)
			if h, res := anonHuge(b, huge.out.Data); h == 0 {
				b.Skipf("no 2 MiB pages were given (%d of %d bytes)", h, res)
			}
			tuneRounds(b, []tuneVariant{{"4k", func() {}, small}, {"huge", func() {}, huge}}, small)
		})
	}
}
