package bench

// Benchmarks of the quantized formats people download (issue 11): the
// forward pass and the engine end to end on the stories110M-shaped
// synthetic model with its matrices in K-quant and legacy 4-bit formats.
// Run, for example:
//
//	go test ./bench/ -run '^$' -bench 'QuantDecode|EngineDecode' -benchtime 20x
//
// The weights are random blocks with sane scales: the speed of an integer
// product does not depend on the values. Figures go into RESULTS.md; the
// side-by-side comparison with llama.cpp is bench/sidebyside.sh.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// quantMix names a set of weight types: Body for the layer matrices, Out
// for the output matrix (llama.cpp's Q4_K_M and Q5_K_M keep the output in
// Q6_K, as does its Q4_0).
type quantMix struct {
	Name      string
	Body, Out ml.Type
}

var quantMixes = []quantMix{
	{"Q4_K_M", ml.Q4_K, ml.Q6_K},
	{"Q5_K_M", ml.Q5_K, ml.Q6_K},
	{"Q6_K", ml.Q6_K, ml.Q6_K},
	{"Q4_0", ml.Q4_0, ml.Q6_K},
	{"Q8_0", ml.Q8_0, ml.Q8_0},
	{"F16", ml.F16, ml.F16},
}

// f16Offsets are the byte offsets of the f16 scales in a block of each
// type, set to small finite values in random blocks.
var f16Offsets = map[ml.Type][]int{
	ml.Q4_0: {0}, ml.Q8_0: {0}, ml.Q4_K: {0, 2}, ml.Q5_K: {0, 2}, ml.Q6_K: {208},
}

// randomMatrix is a rows x cols matrix of type t with random blocks.
func randomMatrix(b *testing.B, r *rand.Rand, t ml.Type, rows, cols int) *ml.Matrix {
	if t == ml.F16 {
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = float32(r.NormFloat64()) * 0.03
		}
		m, err := ml.Quantize(ml.F16, rows, cols, f)
		require.NoError(b, err)
		return m
	}
	rb, err := t.RowBytes(cols)
	require.NoError(b, err)
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	bb := t.BlockBytes()
	for o := 0; o < len(data); o += bb {
		for _, off := range f16Offsets[t] {
			binary.LittleEndian.PutUint16(data[o+off:], ml.F32ToF16(float32(r.Float64()*0.002)))
		}
	}
	m, err := ml.NewMatrix(t, rows, cols, data)
	require.NoError(b, err)
	return m
}

var mixModels = map[string]*model.Weights{}

// mixModel is the stories110M-shaped model with its matrices in mix q
// (norms from the synthetic model), generated once per process.
func mixModel(b *testing.B, q quantMix) *model.Weights {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if w := mixModels[q.Name]; w != nil {
		return w
	}
	base, err := model.Synthetic(model.Stories110MConfig(), 42, ml.Q8_0)
	require.NoError(b, err)
	r := rand.New(rand.NewPCG(42, uint64(q.Body)))
	c := base.Config
	w := &model.Weights{Config: c, Name: "random " + q.Name, Norm: base.Norm}
	w.Embed = randomMatrix(b, r, q.Body, c.Vocab, c.Dim)
	w.Output = randomMatrix(b, r, q.Out, c.Vocab, c.Dim)
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	for _, l := range base.Layers {
		w.Layers = append(w.Layers, model.Layer{
			AttnNorm: l.AttnNorm, FFNNorm: l.FFNNorm,
			Q: randomMatrix(b, r, q.Body, qDim, c.Dim), K: randomMatrix(b, r, q.Body, kvDim, c.Dim),
			V: randomMatrix(b, r, q.Body, kvDim, c.Dim), O: randomMatrix(b, r, q.Body, c.Dim, qDim),
			Gate: randomMatrix(b, r, q.Body, c.Hidden, c.Dim), Up: randomMatrix(b, r, q.Body, c.Hidden, c.Dim),
			Down: randomMatrix(b, r, q.Body, c.Dim, c.Hidden),
		})
	}
	require.NoError(b, w.Check())
	mixModels[q.Name] = w
	return w
}

// BenchmarkQuantDecode measures the forward pass of one decode step at
// batch 1 and 32 with a 128-token context per sequence, for each format.
func BenchmarkQuantDecode(b *testing.B) {
	for _, q := range quantMixes {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/batch=%d", q.Name, batch), func(b *testing.B) {
				w := mixModel(b, q)
				const ctx = 128
				pool := newPool(b, w.Config, batch*(ctx+b.N+32))
				r, err := model.NewRunner(w, pool)
				require.NoError(b, err)
				tabs := make([]*kvcache.PageTable, batch)
				for i := range tabs {
					tabs[i] = pool.NewTable(kvcache.RequestID(i+1), "bench")
					require.NoError(b, tabs[i].Reserve(ctx+b.N+1))
					prompt := make([]int, ctx)
					for j := range prompt {
						prompt[j] = 3 + (i*31+j*7)%(w.Config.Vocab-3)
					}
					require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tabs[i]}}}))
				}
				in := &model.Batch{Seqs: make([]model.Seq, batch)}
				b.ResetTimer()
				for i := range b.N {
					for s := range tabs {
						in.Seqs[s] = model.Seq{Tokens: []int{3 + (i+s)%100}, Table: tabs[s], Logits: true}
					}
					require.NoError(b, r.Forward(in))
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tokens/s")
				for _, t := range tabs {
					require.NoError(b, t.Release())
				}
			})
		}
	}
}

// BenchmarkEngineDecode measures single-stream decode end to end through
// the engine's public API (admission, scheduling, validation, sampling
// over the vocabulary, streaming) after a 128- or 512-token prompt: 64
// tokens generated greedily, tokens/s of the decode phase.
func BenchmarkEngineDecode(b *testing.B) {
	for _, name := range []string{"Q4_K_M", "Q8_0", "F16"} {
		var q quantMix
		for _, m := range quantMixes {
			if m.Name == name {
				q = m
			}
		}
		for _, ctx := range []int{128, 512} {
			b.Run(fmt.Sprintf("%s/ctx=%d", q.Name, ctx), func(b *testing.B) {
				w := mixModel(b, q)
				e, err := engine.New(engine.Config{
					Weights: w, Tokenizer: tokenizer.NewBytes(), KVMemory: 128 << 20, MaxContext: 1024,
					DisablePrefixCache: true,
				})
				require.NoError(b, err)
				defer e.Close()
				const gen = 64
				var decode time.Duration
				var tokens int
				b.ResetTimer()
				for i := range b.N {
					res, err := e.Generate(context.Background(), engine.Request{
						Tokens: benchPrompt(i, ctx, w.Config.Vocab), MaxTokens: gen, Tenant: "bench",
					})
					require.NoError(b, err)
					decode += res.Timings.Decode
					tokens += res.Timings.DecodeTokens
				}
				b.ReportMetric(float64(tokens)/decode.Seconds(), "tokens/s")
			})
		}
	}
}
