package bench

import (
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// BenchmarkKVCompression measures host-tier compression on real KV data:
// the pages stories260K writes for a few prompts, compressed page by page
// as the host tier does (s2 and zstd at its fastest level, the tier's
// settings). It reports the ratio and the throughput of compression.
func BenchmarkKVCompression(b *testing.B) {
	dir := testmodels.Dir(b)
	w, tok, err := model.Open(testmodels.Path(b, "stories260K.bin"), dir+"/tok512.bin")
	require.NoError(b, err)
	defer w.Close()
	pool := newPool(b, w.Config, 512)
	r, err := model.NewRunner(w, pool)
	require.NoError(b, err)

	// Fill full pages with K/V from real text: prompt, then greedy decoding.
	var pages [][]byte
	for i, prompt := range []string{"Once upon a time", "Lily and Ben went to the park", "The cat"} {
		ids, err := tok.Encode(prompt, tokenizer.Options{BOS: true})
		require.NoError(b, err)
		tab := pool.NewTable(kvcache.RequestID(i+1), "bench")
		require.NoError(b, tab.Reserve(128))
		batch := &model.Batch{Seqs: []model.Seq{{Tokens: ids, Table: tab, Logits: true}}}
		require.NoError(b, r.Forward(batch))
		for tab.Written() < 128 {
			batch.Seqs[0] = model.Seq{Tokens: []int{sample.Argmax(batch.Logits[0])}, Table: tab, Logits: true}
			require.NoError(b, r.Forward(batch))
		}
		for _, idx := range tab.Pages() {
			buf := make([]byte, pool.Geometry().PageBytes())
			require.NoError(b, pool.Arena().Download(buf, int64(idx)*pool.Geometry().PageBytes()))
			pages = append(pages, buf)
		}
		require.NoError(b, tab.Release())
	}
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	require.NoError(b, err)
	zbetter, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	require.NoError(b, err)
	for _, c := range []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"s2", func(p []byte) []byte { return s2.Encode(nil, p) }},
		{"zstd-fastest", func(p []byte) []byte { return zenc.EncodeAll(p, nil) }},
		{"zstd-better", func(p []byte) []byte { return zbetter.EncodeAll(p, nil) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var in, out int64
			start := time.Now()
			for range b.N {
				for _, p := range pages {
					in += int64(len(p))
					out += int64(len(c.fn(p)))
				}
			}
			b.ReportMetric(float64(in)/float64(out), "ratio")
			b.ReportMetric(float64(in)/time.Since(start).Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(len(pages)), "pages")
		})
	}
}
