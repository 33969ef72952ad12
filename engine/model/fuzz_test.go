package model

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// FuzzFromGGUF feeds arbitrary bytes through gguf.Parse and FromGGUF:
// whatever the file claims, the result is weights that pass Check or an
// error, never a panic or an allocation sized by a count the file does not
// back (block_count = 2^30 once asked for ~318 GB). The seeds are the tiny
// model, hostile edits of it and, where present, stories260K.gguf. Explore
// with `go test -run X -fuzz FuzzFromGGUF -fuzztime 30s -fuzzminimizetime 0s
// ./engine/model/` (minimizing a found input of tens of KB takes up to the
// default minute, which shows as 0 execs/sec).
func FuzzFromGGUF(f *testing.F) {
	f.Add(newTinyModel().bytes(f))
	f.Add(newTinyModel().set("llama.block_count", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.attention.head_count", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.feed_forward_length", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.context_length", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.attention.key_length", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.rope.dimension_count", uint32(1)<<30).bytes(f))
	f.Add(newTinyModel().set("llama.expert_count", uint32(1)<<30).set("llama.expert_used_count", uint32(2)).bytes(f))
	f.Add(newTinyModel().drop("output.weight").bytes(f))
	f.Add(newTinyMoE().bytes(f))
	f.Add(newTinyMoE().set("llama.expert_used_count", uint32(1)<<30).bytes(f))
	if b, err := os.ReadFile(filepath.Join(testmodels.Dir(f), "stories260K.gguf")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		if err != nil {
			return
		}
		w, err := FromGGUF(file)
		if err != nil {
			require.Nil(t, w)
			return
		}
		require.NoError(t, w.Check())
		require.Len(t, w.Layers, w.Config.Layers)
		require.LessOrEqual(t, w.Config.Layers, len(file.Tensors))
		require.Equal(t, w.Config.Vocab, w.Embed.Rows)
	})
}
