package gpu

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestGPUHalfActivations runs Gemma 2 (GeGLU, soft-caps, sliding window)
// with f16 weights, so activations reach the GEMMs as f16 (cuBLAS GemmEx),
// over f32, f16 and bf16 KV: every attention variant with f16 output and
// the f16 GeGLU. Prefill and one decode step give finite logits. (On the
// driver stand-in this checks the launches; on a GPU also the values.)
func TestGPUHalfActivations(t *testing.T) {
	d := gpuOrSkip(t)
	g := testmodels.LoadArchGolden(t, "gemma2")
	w, f, err := model.LoadGGUF(g.Model)
	require.NoError(t, err)
	defer f.Close()
	for _, kv := range []device.DType{device.F32, device.F16, device.BF16} {
		t.Run(kv.String(), func(t *testing.T) {
			pool := gpuPool(t, d, w.Config, kv, 16)
			r, err := New(d, w, pool, DefaultOptions())
			require.NoError(t, err)
			defer r.Close()
			tab := pool.NewTable(1, "half")
			require.NoError(t, tab.Reserve(32))
			prompt := g.Cases[0].Prompt
			if len(prompt) > 16 {
				prompt = prompt[:16]
			}
			b := model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tab, Logits: true}}}
			require.NoError(t, r.Forward(&b))
			b = model.Batch{Seqs: []model.Seq{{Tokens: prompt[:1], Table: tab, Logits: true}}}
			require.NoError(t, r.Forward(&b))
			require.Len(t, b.Logits[0], w.Config.Vocab)
			finite := true
			for _, v := range b.Logits[0] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					finite = false
					break
				}
			}
			kernelOut(t).True(finite, "non-finite logits with %v KV", kv)
		})
	}
}
