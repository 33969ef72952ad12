package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// BenchmarkEmbed measures embeddings/s through Engine.Embed: one call of
// 32 inputs of 128 tokens each (token arrays), on random weights of two
// shapes: bge-base (BERT, F32, CLS pooling) and Qwen3-Embedding-0.6B
// (a Qwen3-shaped decoder, Q8_0, last-token pooling). Run one shape at a
// time on a shared machine:
//
//	go test ./bench -run '^$' -bench 'Embed/bge-base' -benchtime 3x
func BenchmarkEmbed(b *testing.B) {
	const inputs, tokens = 32, 128
	for _, tc := range []struct {
		name string
		load func(b *testing.B) (*model.Weights, tokenizer.Tokenizer)
	}{
		{"bge-base", func(b *testing.B) (*model.Weights, tokenizer.Tokenizer) {
			data, err := embedtest.BERTBytes(embedtest.BERTSpec{Pooling: 2, Lower: true}, embedtest.BGEBase)
			require.NoError(b, err)
			f, err := gguf.Parse(data)
			require.NoError(b, err)
			w, err := model.FromGGUF(f)
			require.NoError(b, err)
			tok, err := tokenizer.FromMetadata(f)
			require.NoError(b, err)
			return w, tok
		}},
		{"qwen3-embedding-0.6b", func(b *testing.B) (*model.Weights, tokenizer.Tokenizer) {
			cfg := model.Config{Dim: 1024, Hidden: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
				Vocab: 151669, MaxContext: 32768, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 128, BOS: -1, EOS: 151643}
			w, err := model.Synthetic(cfg, 7, ml.Q8_0)
			require.NoError(b, err)
			w.Config.Arch, w.Config.Pooling = "qwen3", model.PoolingLast
			return w, tokenizer.NewBytes()
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w, tok := tc.load(b)
			e, err := engine.New(engine.Config{Weights: w, Tokenizer: tok, Device: "cpu", MaxContext: 512,
				KVMemory: 1 << 30, MaxBatchTokens: inputs * tokens, MaxSeqs: inputs})
			require.NoError(b, err)
			defer e.Close()
			req := engine.EmbedRequest{Tokens: make([][]int, inputs)}
			for i := range req.Tokens {
				req.Tokens[i] = make([]int, tokens)
				for j := range req.Tokens[i] {
					req.Tokens[i][j] = 200 + (i*131+j*17)%1000
				}
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				res, err := e.Embed(b.Context(), req)
				require.NoError(b, err)
				require.Len(b, res.Data, inputs)
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(inputs*b.N)/sec, "embeddings/s")
			b.ReportMetric(float64(inputs*tokens*b.N)/sec, "tokens/s")
			b.Logf("%s: %d x %d tokens, threads %d", tc.name, inputs, tokens, e.Config().Threads)
		})
	}
}

// BenchmarkEmbedSideBySide runs kvwarden next to llama.cpp on one
// thread, on the same file and token inputs of 128 tokens, alternating
// within each iteration: kvwarden through Engine.Embed (the inputs
// batched by the scheduler), llama.cpp through bench/llamaembed with
// BATCH=1 (the inputs as sequences of one llama_encode/llama_decode), its
// own compute time (model loading excluded). Shapes: bge-base (BERT, F32,
// CLS pooling, 32 inputs) and Qwen3-Embedding-0.6B (Q8_0, last-token
// pooling, 8 inputs to keep a run to a few minutes on a shared machine).
// It needs KVWARDEN_LLAMA_EMBED (docs/EMBEDDINGS.md).
//
//	KVWARDEN_LLAMA_EMBED=/tmp/llamaembed go test ./bench -run '^$' -bench EmbedSideBySide -benchtime 2x
func BenchmarkEmbedSideBySide(b *testing.B) {
	bin := os.Getenv("KVWARDEN_LLAMA_EMBED")
	if bin == "" {
		b.Skip("KVWARDEN_LLAMA_EMBED is not set (a bench/llamaembed binary built against llama.cpp)")
	}
	const tokens = 128
	for _, tc := range []struct {
		name   string
		inputs int
		write  func(b *testing.B) string
	}{
		{"bge-base", 32, func(b *testing.B) string {
			data, err := embedtest.BERTBytes(embedtest.BERTSpec{Pooling: 2, Lower: true}, embedtest.BGEBase)
			require.NoError(b, err)
			path := filepath.Join(b.TempDir(), "bge-base.gguf")
			require.NoError(b, os.WriteFile(path, data, 0o644))
			return path
		}},
		{"qwen3-embedding-0.6b", 8, func(b *testing.B) string {
			path, _ := embedtest.Write(b, embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true, Type: ml.Q8_0,
				Shape: &embedtest.Qwen3Embedding06B})
			return path
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := tc.write(b)
			sideBySide(b, bin, path, tc.inputs, tokens)
		})
	}
}

func sideBySide(b *testing.B, bin, path string, inputs, tokens int) {
	e, err := engine.New(engine.Config{ModelPath: path, Device: "cpu", Threads: 1, MaxContext: 512,
		KVMemory: 1 << 30, MaxBatchTokens: inputs * tokens, MaxSeqs: inputs})
	require.NoError(b, err)
	defer e.Close()
	req := engine.EmbedRequest{Tokens: make([][]int, inputs)}
	var lines strings.Builder
	for i := range req.Tokens {
		req.Tokens[i] = make([]int, tokens)
		for j := range req.Tokens[i] {
			req.Tokens[i][j] = 200 + (i*131+j*17)%1000
		}
		lines.WriteString(strings.Trim(fmt.Sprint(req.Tokens[i]), "[]") + "\n")
	}
	var ours, theirs float64 // seconds
	for b.Loop() {
		start := time.Now()
		_, err := e.Embed(b.Context(), req)
		require.NoError(b, err)
		ours += time.Since(start).Seconds()

		cmd := exec.Command(bin, path, "-1")
		cmd.Env = append(os.Environ(), "BATCH=1", "THREADS=1")
		cmd.Stdin = strings.NewReader(lines.String())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(b, cmd.Run(), "%s", stderr.String())
		_, sec, ok := strings.Cut(strings.TrimSpace(stderr.String()), "compute_seconds ")
		require.True(b, ok, "%s", stderr.String())
		s, err := strconv.ParseFloat(sec, 64)
		require.NoError(b, err)
		theirs += s
	}
	b.ReportMetric(float64(inputs*b.N)/ours, "embeddings/s")
	b.ReportMetric(float64(inputs*b.N)/theirs, "llama.cpp-embeddings/s")
	b.ReportMetric(theirs/ours, "ratio")
}
