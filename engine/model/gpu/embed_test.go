package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// Embedding models (a pooling type), encoders and non-causal attention are
// CPU-only: Supports says why, so device auto picks the CPU and cuda is
// refused at New instead of failing every request.
func TestSupportsRefusesEmbeddingModels(t *testing.T) {
	dec, _ := embedtest.Write(t, embedtest.Spec{Arch: "qwen3", Pooling: 3})
	enc, _ := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 2})
	gen, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: -1})
	for _, tc := range []struct {
		path string
		ok   bool
	}{{dec, false}, {enc, false}, {gen, true}} {
		w, _, err := model.Load(tc.path)
		require.NoError(t, err)
		err = Supports(w)
		if tc.ok {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, model.ErrNotImplemented)
		}
		require.NoError(t, w.Close())
	}
}
