package model

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// randQ4K is a rows x cols Q4_K matrix of random blocks (small scales, so
// the values stay finite): quantizing 10^8 random floats would take far
// longer than the benchmark.
func randQ4K(r *rand.Rand, rows, cols int) *ml.Matrix {
	nb := rows * cols / 256
	data := make([]byte, nb*144)
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	d := ml.F32ToF16(0.002)
	for b := range nb {
		binary.LittleEndian.PutUint16(data[b*144:], d)
		binary.LittleEndian.PutUint16(data[b*144+2:], d)
	}
	m, err := ml.NewMatrix(ml.Q4_K, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return m
}

// BenchmarkMoEFFN runs one MoE FFN layer of Qwen3-30B-A3B's shape (width
// 2048, 128 experts of width 768, 8 used, softmax router renormalised)
// with Q4_K experts, for a decode step of 1 and 8 tokens and a 128-token
// prefill chunk. It reports tokens/s through this layer and the expert
// weight bytes streamed per token: each routed expert is read once per
// step however many tokens chose it, so a batch reads less per token.
//
//	go test -run '^$' -bench BenchmarkMoEFFN -benchtime 20x ./engine/model/
func BenchmarkMoEFFN(b *testing.B) {
	const dim, experts, used, hidden = 2048, 128, 8, 768
	r := rand.New(rand.NewPCG(7, 8))
	e := &Experts{Router: ml.FromF32(experts, dim, randVec(r, experts*dim, 0.05))}
	for range experts {
		e.Gate = append(e.Gate, randQ4K(r, hidden, dim))
		e.Up = append(e.Up, randQ4K(r, hidden, dim))
		e.Down = append(e.Down, randQ4K(r, dim, hidden))
	}
	perExpert := int64(len(e.Gate[0].Data) + len(e.Up[0].Data) + len(e.Down[0].Data))
	m := arch.MoE{Experts: experts, Used: used, Hidden: hidden, NormTopK: true}
	// "one-by-one" feeds the 8 tokens as 8 separate steps: what grouping
	// by expert saves.
	for _, bc := range []struct {
		n     int
		alone bool
	}{{1, false}, {8, false}, {8, true}, {128, false}} {
		name := fmt.Sprintf("tokens=%d", bc.n)
		if bc.alone {
			name += "/one-by-one"
		}
		n := bc.n
		b.Run(name, func(b *testing.B) {
			run := moeRunner(dim, m, arch.SwiGLU)
			// Different tokens every step, as in decoding: the same ones
			// would keep their experts in the cache (8 experts are 21 MB).
			const variants = 16
			xs := make([][]float32, variants)
			for i := range xs {
				xs[i] = randVec(r, n*dim, 1)
			}
			out := make([]float32, n*dim)
			run.moeFFN(e, xs[0], n, out) // scratch
			run.moe.streamed = 0
			cpu0 := processCPU()
			b.ResetTimer()
			for it := range b.N {
				x := xs[it%variants]
				if !bc.alone {
					run.moeFFN(e, x, n, out)
					continue
				}
				for i := range n {
					run.moeFFN(e, x[i*dim:(i+1)*dim], 1, out[i*dim:(i+1)*dim])
				}
			}
			b.StopTimer()
			tokens := float64(b.N * n)
			b.ReportMetric(tokens/b.Elapsed().Seconds(), "tokens/s")
			// On a shared machine wall time measures the neighbours too;
			// tokens per CPU-second of this process (all threads) do not.
			b.ReportMetric(tokens/(processCPU()-cpu0), "tokens/cpu-s")
			b.ReportMetric(float64(run.moe.streamed*perExpert)/tokens, "expert-bytes/token")
			b.ReportMetric(float64(run.moe.streamed)/float64(b.N), "experts/step")
		})
	}
}

// moeModel30B is a Qwen3-30B-A3B-shaped model (width 2048, 32 query heads
// of 128 sharing 4 KV heads, Q/K norm, 128 experts of width 768, 8 used)
// cut to layers layers and a 32000-token vocabulary, with random Q4_K
// matrices: the mixture-of-experts decoder end to end through the Runner.
func moeModel30B(layers int) *Weights {
	r := rand.New(rand.NewPCG(9, 10))
	const dim, heads, kvHeads, hd, vocab, experts, used, hidden = 2048, 32, 4, 128, 32000, 128, 8, 768
	c := Config{Dim: dim, Hidden: 6144, Layers: layers, Heads: heads, KVHeads: kvHeads, HeadDim: hd, Vocab: vocab,
		MaxContext: 4096, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: hd, Arch: "qwen3moe", BOS: -1, EOS: -1,
		Block: arch.Block{RopeStyle: arch.RopeNeoX, QKNorm: true,
			MoE: arch.MoE{Experts: experts, Used: used, Hidden: hidden, NormTopK: true}}}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	w := &Weights{Config: c, Name: "moe-30b-a3b-shape", Embed: randQ4K(r, vocab, dim), Norm: ones(dim)}
	w.Output = randQ4K(r, vocab, dim)
	for range layers {
		e := &Experts{Router: ml.FromF32(experts, dim, randVec(r, experts*dim, 0.05))}
		for range experts {
			e.Gate = append(e.Gate, randQ4K(r, hidden, dim))
			e.Up = append(e.Up, randQ4K(r, hidden, dim))
			e.Down = append(e.Down, randQ4K(r, dim, hidden))
		}
		w.Layers = append(w.Layers, Layer{
			AttnNorm: ones(dim), FFNNorm: ones(dim), QNorm: ones(hd), KNorm: ones(hd),
			Q: randQ4K(r, heads*hd, dim), K: randQ4K(r, kvHeads*hd, dim), V: randQ4K(r, kvHeads*hd, dim),
			O: randQ4K(r, dim, heads*hd), MoE: e,
		})
	}
	if err := w.Check(); err != nil {
		panic(err)
	}
	return w
}

// BenchmarkMoEModel runs a Qwen3-30B-A3B-shaped model cut to 2 layers
// (moeModel30B) through the Runner: decode steps of 1 and 8 sequences (64
// tokens of context each) and a 128-token prefill, reporting tokens/s
// (wall and per CPU-second of the process).
//
//	go test -run '^$' -bench BenchmarkMoEModel -benchtime 16x ./engine/model/
func BenchmarkMoEModel(b *testing.B) {
	w := moeModel30B(2)
	pool := newTestPool(b, w.Config, 8*24+16)
	run, err := NewRunner(w, pool)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	tokens := func(n int) []int {
		t := make([]int, n)
		for i := range t {
			t[i] = r.IntN(w.Config.Vocab)
		}
		return t
	}
	id := kvcache.RequestID(1)
	for _, bc := range []struct {
		name   string
		seqs   int
		step   int // tokens per sequence per step
		prefix int // context before the timed steps
	}{{"decode/B=1", 1, 1, 64}, {"decode/B=8", 8, 1, 64}, {"prefill/1x128", 1, 128, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			var tabs []*kvcache.PageTable
			reset := func() {
				b.StopTimer()
				defer b.StartTimer()
				for _, t := range tabs {
					if err := t.Release(); err != nil {
						b.Fatal(err)
					}
				}
				tabs = tabs[:0]
				for range bc.seqs {
					t := pool.NewTable(id, "bench")
					id++
					if err := t.Reserve(bc.prefix + 16*bc.step); err != nil {
						b.Fatal(err)
					}
					if bc.prefix > 0 {
						if err := run.Forward(&Batch{Seqs: []Seq{{Tokens: tokens(bc.prefix), Table: t}}}); err != nil {
							b.Fatal(err)
						}
					}
					tabs = append(tabs, t)
				}
			}
			reset()
			b.ResetTimer()
			steps := 0
			var wall time.Duration
			cpu := 0.0
			for range b.N {
				if steps == 16 {
					reset()
					steps = 0
				}
				batch := &Batch{}
				for _, t := range tabs {
					batch.Seqs = append(batch.Seqs, Seq{Tokens: tokens(bc.step), Table: t, Logits: true})
				}
				c0, t0 := processCPU(), time.Now()
				if err := run.Forward(batch); err != nil {
					b.Fatal(err)
				}
				wall += time.Since(t0)
				cpu += processCPU() - c0
				steps++
			}
			n := float64(b.N * bc.seqs * bc.step)
			b.ReportMetric(n/wall.Seconds(), "tokens/s")
			b.ReportMetric(n/cpu, "tokens/cpu-s")
			for _, t := range tabs {
				if err := t.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
