package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// The random tensors mkgguf writes decode to finite weights of about the
// intended deviation (1/sqrt(cols)) and mean near zero, and the same seed
// gives the same bytes.
func TestRandomTensor(t *testing.T) {
	const rows, cols = 64, 512
	want := 1 / math.Sqrt(cols)
	for _, ty := range []ml.Type{ml.F32, ml.F16, ml.BF16, ml.Q8_0, ml.Q4_0, ml.Q4_K, ml.Q5_K, ml.Q6_K, ml.IQ4_XS, ml.MXFP4} {
		t.Run(ty.String(), func(t *testing.T) {
			rb, err := ty.RowBytes(cols)
			require.NoError(t, err)
			data := make([]byte, rows*rb)
			require.NoError(t, randomTensor(data, ty, rows, cols, 7))
			again := make([]byte, rows*rb)
			require.NoError(t, randomTensor(again, ty, rows, cols, 7))
			require.Equal(t, data, again)
			m, err := ml.NewMatrix(ty, rows, cols, data)
			require.NoError(t, err)
			row := make([]float32, cols)
			var sum, sq float64
			for r := range rows {
				ml.Dequantize(row, m, r)
				for _, v := range row {
					require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
					sum += float64(v)
					sq += float64(v) * float64(v)
				}
			}
			n := float64(rows * cols)
			mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
			require.InDelta(t, want, std, want/2, "deviation")
			require.Less(t, math.Abs(mean), want/2, "mean")
		})
	}
	require.ErrorContains(t, randomTensor(make([]byte, 10), ml.Q4_K, 1, 256, 1), "bytes")
	require.ErrorContains(t, randomTensor(make([]byte, 84), ml.Q2_K, 1, 256, 1), "not implemented")
}

// moreBits is llama-quantize's use_more_bits: for 22 layers, the first
// two, the last three and every third between.
func TestMoreBits(t *testing.T) {
	var got []int
	for i := range 22 {
		if moreBits(i, 22) {
			got = append(got, i)
		}
	}
	require.Equal(t, []int{0, 1, 4, 7, 10, 13, 16, 19, 20, 21}, got)
}

// mkgguf writes a mixture-of-experts shape that kvwarden loads as that
// architecture, with -layers cutting the depth and the expert tensors 3-D
// in llama-quantize's mix (down experts in Q6_K in the more-bits layers).
func TestMkggufMoE(t *testing.T) {
	shapes["test-moe"] = model.Config{
		Arch: "qwen3moe", Dim: 256, Hidden: 512, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 320, MaxContext: 256, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: 64, BOS: 1, EOS: 2,
		Block: arch.Block{RopeStyle: arch.RopeNeoX, QKNorm: true,
			MoE: arch.MoE{Experts: 8, Used: 2, Hidden: 256, NormTopK: true}},
	}
	t.Cleanup(func() { delete(shapes, "test-moe") })
	path := filepath.Join(t.TempDir(), "moe.gguf")
	require.NoError(t, mkgguf([]string{"-shape", "test-moe", "-layers", "3", "-type", "q4_k_m", "-o", path}))
	w, _, err := model.Open(path, "")
	require.NoError(t, err)
	defer w.Close()
	c := w.Config
	require.Equal(t, "qwen3moe", c.Arch)
	require.Equal(t, 3, c.Layers)
	require.Equal(t, arch.MoE{Experts: 8, Used: 2, Hidden: 256, NormTopK: true}, c.Block.MoE)
	require.True(t, c.Block.QKNorm)
	for i, l := range w.Layers {
		require.NotNil(t, l.MoE, "layer %d", i)
		require.Len(t, l.MoE.Down, 8)
		require.Equal(t, ml.F32, l.MoE.Router.Type)
		require.Equal(t, ml.Q4_K, l.MoE.Gate[0].Type)
		down := ml.Q4_K
		if moreBits(i, 3) {
			down = ml.Q6_K
		}
		require.Equal(t, down, l.MoE.Down[7].Type, "layer %d", i)
	}
	require.ErrorContains(t, mkgguf([]string{"-shape", "test-moe", "-layers", "-1", "-o", path}), "negative")
}

// mkgguf writes the Phi-4-mini layout (phi3 with fused QKV and gate/up,
// partial rotary, LongRoPE factors of RopeDim/2 values, tied output) that
// kvwarden loads as such.
func TestMkggufPhi3(t *testing.T) {
	shapes["test-phi3"] = model.Config{
		Arch: "phi3", Dim: 256, Hidden: 512, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 320, MaxContext: 16384, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 48, BOS: 1, EOS: 2,
	}
	t.Cleanup(func() { delete(shapes, "test-phi3") })
	path := filepath.Join(t.TempDir(), "phi3.gguf")
	require.NoError(t, mkgguf([]string{"-shape", "test-phi3", "-layers", "2", "-type", "q4_k_m", "-o", path}))
	w, _, err := model.Open(path, "")
	require.NoError(t, err)
	defer w.Close()
	c := w.Config
	require.Equal(t, "phi3", c.Arch)
	require.Equal(t, 2, c.Layers)
	require.Equal(t, 48, c.RopeDim)
	require.Equal(t, 2, c.KVHeads)
	require.Len(t, w.RopeLong, 24)
	require.Len(t, w.RopeShort, 24)
	require.NotEqual(t, w.RopeLong, w.RopeShort)
	require.Same(t, w.Embed, w.Output, "tied output")
	require.Equal(t, ml.Q6_K, w.Embed.Type)
	require.Equal(t, 2*64, w.Layers[0].K.Rows)
	require.Equal(t, ml.Q5_K, w.Layers[0].Q.Type, "attn_qkv in Q4_K_M's mix")
}

// mkgguf writes the gpt-oss layout in the MXFP4_MOE mix (experts MXFP4,
// other matrices Q8_0, router F32) with the biases, sinks, sliding window
// and YaRN keys that kvwarden loads as gpt-oss.
func TestMkggufGptOss(t *testing.T) {
	shapes["test-gptoss"] = model.Config{
		Arch: "gpt-oss", Dim: 256, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 320, MaxContext: 8192, NormEps: 1e-5, RopeTheta: 150000, RopeDim: 64, BOS: 1, EOS: 2,
		Block: arch.Block{RopeStyle: arch.RopeNeoX, Activation: arch.SwiGLUOAI, Window: 16, WindowPattern: 2,
			Scaling: arch.Scaling{Kind: arch.ScalingYaRN, Factor: 32, OrigContext: 256, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1},
			MoE:     arch.MoE{Experts: 8, Used: 4, Hidden: 128}},
	}
	t.Cleanup(func() { delete(shapes, "test-gptoss") })
	path := filepath.Join(t.TempDir(), "gptoss.gguf")
	require.NoError(t, mkgguf([]string{"-shape", "test-gptoss", "-layers", "2", "-type", "mxfp4_moe", "-o", path}))
	w, _, err := model.Open(path, "")
	require.NoError(t, err)
	defer w.Close()
	c := w.Config
	require.Equal(t, "gpt-oss", c.Arch)
	require.Equal(t, 2, c.Layers)
	require.Equal(t, 16, c.Block.Window)
	require.Equal(t, arch.SwiGLUOAI, c.Block.Activation)
	require.Equal(t, arch.ScalingYaRN, c.Block.Scaling.Kind)
	require.Equal(t, 256, c.Block.Scaling.OrigContext)
	require.Equal(t, 8, c.Block.MoE.Experts)
	require.Equal(t, ml.Q8_0, w.Embed.Type)
	require.Equal(t, ml.Q8_0, w.Output.Type)
	for i, l := range w.Layers {
		require.Equal(t, ml.Q8_0, l.Q.Type, "layer %d", i)
		require.Len(t, l.QBias, 4*64)
		require.Len(t, l.OBias, 256)
		require.Len(t, l.Sinks, 4)
		require.Equal(t, ml.F32, l.MoE.Router.Type)
		require.Len(t, l.MoE.RouterBias, 8)
		require.Equal(t, ml.MXFP4, l.MoE.Gate[0].Type)
		require.Equal(t, ml.MXFP4, l.MoE.Down[7].Type)
		require.Len(t, l.MoE.DownBias, 8)
		require.Len(t, l.MoE.DownBias[7], 256)
	}
}
