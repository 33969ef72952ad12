package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// BenchmarkEmbedShort is the latency side of BenchmarkEmbed: one input of
// 12 tokens (a search query) on the bge-base shape, one thread, one call
// per iteration:
//
//	go test ./bench -run '^$' -bench EmbedShort -benchtime 20x
func BenchmarkEmbedShort(b *testing.B) {
	data, err := embedtest.BERTBytes(embedtest.BERTSpec{Pooling: 2, Lower: true}, embedtest.BGEBase)
	require.NoError(b, err)
	f, err := gguf.Parse(data)
	require.NoError(b, err)
	w, err := model.FromGGUF(f)
	require.NoError(b, err)
	tok, err := tokenizer.FromMetadata(f)
	require.NoError(b, err)
	e, err := engine.New(engine.Config{Weights: w, Tokenizer: tok, Device: "cpu", Threads: 1, MaxContext: 512, KVMemory: 1 << 28})
	require.NoError(b, err)
	defer e.Close()
	req := engine.EmbedRequest{Tokens: [][]int{embedtest.Tokens(12, 1)}}
	for b.Loop() {
		_, err := e.Embed(b.Context(), req)
		require.NoError(b, err)
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/query")
}
