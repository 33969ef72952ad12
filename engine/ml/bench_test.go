package ml

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The stories110M shape: the per-token matrix set of the benchmarks.
const (
	bDim    = 768
	bHidden = 2048
	bLayers = 12
	bVocab  = 32000
)

type layerSet struct {
	mats  []*Matrix
	bytes int64 // weight bytes streamed per token
	flops int64 // multiply-adds x 2 per token
}

var (
	setsMu sync.Mutex
	sets   = map[Type]*layerSet{}
)

// stories110M returns the full per-token matrix set (12 layers of Q, K, V,
// O, gate, up, down, then the classifier) in type t, each matrix its own
// memory so a token streams all of it from DRAM.
func stories110M(b *testing.B, t Type) *layerSet {
	setsMu.Lock()
	defer setsMu.Unlock()
	if s := sets[t]; s != nil {
		return s
	}
	r := rand.New(rand.NewPCG(1, uint64(t)))
	s := &layerSet{}
	add := func(rows, cols int) {
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(r.NormFloat64()) * 0.02
		}
		m, err := Quantize(t, rows, cols, src)
		if err != nil {
			b.Fatal(err)
		}
		s.mats = append(s.mats, m)
		s.bytes += int64(len(m.Data))
		s.flops += 2 * int64(rows) * int64(cols)
	}
	for l := 0; l < bLayers; l++ {
		for range 4 {
			add(bDim, bDim)
		}
		add(bHidden, bDim)
		add(bHidden, bDim)
		add(bDim, bHidden)
	}
	add(bVocab, bDim)
	sets[t] = s
	return s
}

func init() {
	// KVW_THREADS overrides the thread count for benchmark experiments.
	if n, err := strconv.Atoi(os.Getenv("KVW_THREADS")); err == nil {
		SetThreads(n)
	}
}

var (
	bwBufOnce sync.Once
	bwBuf     []float32
)

// measureBandwidth reads a 1 GiB []float32 with the SIMD sum kernel on all
// threads (the same parallelFor as MatMul) and returns the best of three
// passes in bytes/s.
func measureBandwidth() float64 {
	bwBufOnce.Do(func() {
		bwBuf = make([]float32, 1<<28)
		for i := range bwBuf {
			bwBuf[i] = float32(i & 1023)
		}
	})
	saved := simdLevel()
	setSIMDLevel(levelAVX512)
	defer setSIMDLevel(saved)
	const chunk = 1 << 20
	var sink float32
	var mu sync.Mutex
	var res []float64
	for pass := 0; pass < 4; pass++ {
		t0 := time.Now()
		parallelFor(len(bwBuf), chunk, Threads(), func(lo, hi int) {
			s := sumSIMD(bwBuf[lo:hi])
			mu.Lock()
			sink += s
			mu.Unlock()
		})
		res = append(res, float64(len(bwBuf)*4)/time.Since(t0).Seconds())
	}
	_ = sink
	sort.Float64s(res)
	return res[len(res)-1]
}

// BenchmarkBandwidth is the memory read bandwidth reference.
func BenchmarkBandwidth(b *testing.B) {
	measureBandwidth()
	b.ResetTimer()
	var bw float64
	for range b.N {
		bw = measureBandwidth()
	}
	b.ReportMetric(bw/1e9, "GB/s")
}

func forEachPath(b *testing.B, f func(b *testing.B)) {
	names := []string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}
	lv := supportedLevels()
	for i := len(lv) - 1; i >= 0; i-- {
		b.Run(names[lv[i]], func(b *testing.B) {
			saved := simdLevel()
			setSIMDLevel(lv[i])
			defer setSIMDLevel(saved)
			f(b)
		})
	}
}

// BenchmarkMatVec streams the whole stories110M per-token weight set with
// n=1 products and reports the weight bytes read per second and their ratio
// to the read bandwidth measured just before in the same process.
func BenchmarkMatVec(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16} {
		b.Run(t.String(), func(b *testing.B) {
			forEachPath(b, func(b *testing.B) {
				s := stories110M(b, t)
				x := randF32(rand.New(rand.NewPCG(2, 3)), bHidden)
				dst := make([]float32, bVocab)
				run := func() {
					for _, m := range s.mats {
						MatMul(dst[:m.Rows], x[:m.Cols], 1, m)
					}
				}
				run()
				bw := measureBandwidth()
				b.ResetTimer()
				for range b.N {
					run()
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				gbs := float64(s.bytes) / sec
				b.ReportMetric(gbs/1e9, "GB/s")
				b.ReportMetric(1/sec, "tok/s")
				if bw > 0 {
					b.ReportMetric(bw/1e9, "bwGB/s")
					b.ReportMetric(gbs/bw, "efficiency")
				}
			})
		})
	}
}

// BenchmarkGEMM runs the stories110M per-token matrix set for n activation
// rows at once (n sequences decoding together) and reports tokens/s.
func BenchmarkGEMM(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16} {
		for _, n := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%v/n=%d", t, n), func(b *testing.B) {
				forEachPath(b, func(b *testing.B) {
					s := stories110M(b, t)
					x := randF32(rand.New(rand.NewPCG(4, 5)), n*bHidden)
					dst := make([]float32, n*bVocab)
					run := func() {
						for _, m := range s.mats {
							MatMul(dst[:n*m.Rows], x[:n*m.Cols], n, m)
						}
					}
					run()
					b.ResetTimer()
					for range b.N {
						run()
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(n)/sec, "tok/s")
					b.ReportMetric(float64(s.flops)*float64(n)/sec/1e9, "GFLOP/s")
				})
			})
		}
	}
}
