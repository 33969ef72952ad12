package kvcache

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

// threadCPU measures CPU time of the benchmark's own OS thread. The build
// machines are shared and oversubscribed, so wall-clock ns/op mostly
// measures the scheduler; CPU time of the locked thread does not count the
// time the thread was waiting to run.
type threadCPU struct{ start time.Duration }

func startCPU() *threadCPU {
	runtime.LockOSThread()
	return &threadCPU{start: threadTime()}
}

// stop reports cpu-ns/op and returns the CPU time used.
func (c *threadCPU) stop(b *testing.B) time.Duration {
	d := threadTime() - c.start
	runtime.UnlockOSThread()
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	return d
}

// storiesGeo is stories260K's KV shape: 5 layers, 4 KV heads of 8.
func storiesGeo() Geometry {
	return Geometry{PageSize: 16, Layers: 5, KVHeads: 4, HeadDim: 8, DType: device.F32}
}

func benchPool(b *testing.B, g Geometry, pages int, mod func(*Config)) *Pool {
	cfg := Config{Geometry: g, Pages: pages, Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cpu.New(), cfg)
	require.NoError(b, err)
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// BenchmarkAllocRelease: one page allocated and released per op, through
// the public table API, on one goroutine.
func BenchmarkAllocRelease(b *testing.B) {
	for _, pages := range []int{1, 8} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			p := benchPool(b, storiesGeo(), 1024, nil)
			ps := p.geo.PageSize
			b.ReportAllocs()
			cpu := startCPU()
			for i := range b.N {
				t := p.NewTable(RequestID(i+1), "a")
				if err := t.Reserve(pages * ps); err != nil {
					b.Fatal(err)
				}
				if err := t.Release(); err != nil {
					b.Fatal(err)
				}
			}
			d := cpu.stop(b)
			b.ReportMetric(float64(b.N*pages)/d.Seconds(), "cpu-pages/s")
		})
	}
}

// BenchmarkValidateTable: the pre-step check of 256 sequences of 64 pages.
func BenchmarkValidateTable(b *testing.B) {
	const seqs, pagesPer = 256, 64
	g := Geometry{PageSize: 16, Layers: 1, KVHeads: 1, HeadDim: 4, DType: device.F32}
	p := benchPool(b, g, seqs*pagesPer, nil)
	tables := make([]*PageTable, seqs)
	for i := range tables {
		t := p.NewTable(RequestID(i+1), Tenant(fmt.Sprint("t", i%4)))
		require.NoError(b, t.Reserve(pagesPer*g.PageSize))
		require.NoError(b, t.Advance(pagesPer*g.PageSize-5)) // last page partial
		tables[i] = t
	}
	b.ResetTimer()
	cpu := startCPU()
	for range b.N {
		for _, t := range tables {
			if err := p.ValidateTable(t); err != nil {
				b.Fatal(err)
			}
		}
	}
	d := cpu.stop(b)
	b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/256x64")
}

// BenchmarkPageOps compares checksum and scrub throughput with a plain
// copy() of the same buffer in the same run.
func BenchmarkPageOps(b *testing.B) {
	for _, size := range []int{storiesGeo().PageElems() * 4, 64 << 10, 2 << 20} {
		a, err := cpu.NewArena(int64(2 * size))
		require.NoError(b, err)
		buf := a.Bytes()
		for i := range buf {
			buf[i] = byte(rand.Uint32())
		}
		src, dst := buf[:size], buf[size:]
		for _, op := range []struct {
			name string
			fn   func()
		}{
			{"copy", func() { copy(dst, src) }},
			{"checksum", func() { _ = device.Checksum(src) }},
			{"xxh3-stream", func() { _ = xxh3.Hash(src) }},
			{"scrub-zero", func() { _ = a.Fill(0, int64(size), 0) }},
			{"scrub-nan", func() { _ = a.Fill(0, int64(size), poisonWord) }},
		} {
			b.Run(fmt.Sprintf("%s/%dKiB", op.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				cpu := startCPU()
				for range b.N {
					op.fn()
				}
				d := cpu.stop(b)
				b.ReportMetric(float64(size)*float64(b.N)/d.Seconds()/1e9, "cpu-GB/s")
			})
		}
	}
}

// fillSequence writes n tokens of data into t directly through the arena.
func fillSequence(p *Pool, t *PageTable, n int, val func(pos, layer, j int) float32) error {
	g := p.geo
	if err := t.Reserve(n); err != nil {
		return err
	}
	for pos := range n {
		page, slot, err := t.Location(pos)
		if err != nil {
			return err
		}
		for l := range g.Layers {
			k, v := g.KOffset(page, l, slot), g.VOffset(page, l, slot)
			for j := range g.KVDim() {
				p.f32[k+j] = val(pos, l, j)
				p.f32[v+j] = val(pos, l, j+g.KVDim())
			}
		}
	}
	return t.Advance(n)
}

// kvData are stand-ins for real KV until the model runs: normal random
// floats (the mantissas of trained activations look like noise) and smooth
// ones (a sinusoid per element along the sequence, as rotary embeddings
// make keys vary: neighbouring tokens are close but not equal).
var kvData = []struct {
	name string
	fn   func(pos, layer, j int) float32
}{
	{"random", func(int, int, int) float32 { return float32(rand.NormFloat64()) }},
	{"smooth", func(pos, layer, j int) float32 {
		return float32(math.Sin(float64(pos)*0.01*float64(j+1) + float64(layer)*0.7 + float64(j)))
	}},
}

// BenchmarkOffloadRestore: SwapOut plus SwapIn of a 1024-token sequence.
// Throughput counts raw page bytes each way once.
func BenchmarkOffloadRestore(b *testing.B) {
	g := Geometry{PageSize: 16, Layers: 8, KVHeads: 8, HeadDim: 64, DType: device.F32} // 256 KiB pages
	const tokens = 1024
	for _, d := range kvData {
		for _, comp := range []string{"none", "s2", "zstd"} {
			b.Run(d.name+"/"+comp, func(b *testing.B) {
				p := benchPool(b, g, 2*tokens/g.PageSize, func(c *Config) {
					c.HostTierBytes = 2 * tokens / 16 * g.PageBytes()
					c.Compression = comp
				})
				req := RequestID(1)
				t := p.NewTable(req, "a")
				require.NoError(b, fillSequence(p, t, tokens, d.fn))
				raw := int64(tokens/g.PageSize) * g.PageBytes()
				b.SetBytes(raw)
				b.ResetTimer()
				cpu0 := processTime()
				for range b.N {
					s, err := p.SwapOut(t)
					if err != nil {
						b.Fatal(err)
					}
					t = p.NewTable(req, "a")
					if err := p.SwapIn(s, t); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				// The copies run on worker threads, so this is the whole
				// process's CPU time (workers and GC included).
				d := processTime() - cpu0
				b.ReportMetric(float64(raw)*float64(b.N)/d.Seconds()/1e9, "cpu-GB/s")
				st := p.Stats()
				b.ReportMetric(float64(st.BytesOffloaded)/float64(st.BytesStored), "ratio")
			})
		}
	}
}

// BenchmarkSwapOutStall is how long the caller (the engine's scheduler
// goroutine) is held by a swap-out of a 1024-token sequence: the
// synchronous SwapOut until every copy is done, against SwapOutAsync, which
// only takes the leases and queues the copies (their completion, Finish and
// the SwapIn that frees the host copies are outside the timer).
func BenchmarkSwapOutStall(b *testing.B) {
	g := Geometry{PageSize: 16, Layers: 8, KVHeads: 8, HeadDim: 64, DType: device.F32} // 256 KiB pages
	const tokens = 1024
	for _, mode := range []string{"sync", "async"} {
		b.Run(mode, func(b *testing.B) {
			p := benchPool(b, g, 2*tokens/g.PageSize, func(c *Config) {
				c.HostTierBytes = 2 * tokens / 16 * g.PageBytes()
			})
			req := RequestID(1)
			t := p.NewTable(req, "a")
			require.NoError(b, fillSequence(p, t, tokens, kvData[0].fn))
			b.ResetTimer()
			for range b.N {
				var s *Swapped
				var err error
				if mode == "sync" {
					s, err = p.SwapOut(t)
					b.StopTimer()
				} else {
					var ps *PendingSwap
					ps, err = p.SwapOutAsync(t)
					b.StopTimer()
					if err == nil {
						<-ps.Done()
						s, err = ps.Finish()
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				t = p.NewTable(req, "a")
				if err := p.SwapIn(s, t); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
