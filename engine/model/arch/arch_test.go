package arch

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// meta is a map-backed Meta.
type meta struct {
	kv                     map[string]float64
	layers, dim, heads, hd int
}

func (m meta) Uint(key string, def int) (int, error) {
	v, ok := m.kv[key]
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("missing %s", key)
		}
		return def, nil
	}
	return int(v), nil
}

func (m meta) Float(key string, def float64, required bool) (float64, error) {
	v, ok := m.kv[key]
	if !ok {
		if required {
			return 0, fmt.Errorf("missing %s", key)
		}
		return def, nil
	}
	return v, nil
}
func (m meta) Bool(key string, def bool) (bool, error) {
	if v, ok := m.kv[key]; ok {
		return v != 0, nil
	}
	return def, nil
}
func (m meta) Has(key string) bool { _, ok := m.kv[key]; return ok }
func (m meta) Layers() int         { return m.layers }
func (m meta) Dim() int            { return m.dim }
func (m meta) Heads() int          { return m.heads }
func (m meta) HeadDim() int        { return m.hd }

func TestRegistry(t *testing.T) {
	require.Equal(t, []string{"deepseek2", "gemma2", "gemma3", "glm4moe", "gpt-oss", "llama", "phi3", "qwen2", "qwen2moe", "qwen3", "qwen3moe"}, Names())
	_, err := Lookup("mamba")
	require.ErrorIs(t, err, ErrUnsupported)
	require.EqualError(t, err, `model: unsupported: architecture "mamba" (supported: deepseek2, gemma2, gemma3, glm4moe, gpt-oss, llama, phi3, qwen2, qwen2moe, qwen3, qwen3moe)`)
	_, err = Lookup("")
	require.ErrorIs(t, err, ErrUnsupported)
	require.Panics(t, func() { Register(Arch{Name: "llama", Describe: func(Meta, *Block) error { return nil }}) })
	a, err := Lookup("phi3")
	require.NoError(t, err)
	require.True(t, a.FusedQKV && a.FusedGateUp)
}

// TestDescribe pins what each architecture's description says, from the
// metadata of the golden files (README of ../shared/golden/arch).
func TestDescribe(t *testing.T) {
	m := meta{kv: map[string]float64{}, layers: 2, dim: 256, heads: 8, hd: 64}
	describe := func(name string, m meta) Block {
		a, err := Lookup(name)
		require.NoError(t, err)
		var b Block
		require.NoError(t, a.Describe(m, &b))
		require.NoError(t, b.Validate())
		return b
	}
	require.Equal(t, Block{}, describe("llama", m))
	require.Equal(t, Block{RopeStyle: RopeNeoX}, describe("qwen2", m))
	require.Equal(t, Block{RopeStyle: RopeNeoX, QKNorm: true}, describe("qwen3", m))
	require.Equal(t, Block{RopeStyle: RopeNeoX}, describe("phi3", m))

	g2 := meta{kv: map[string]float64{"attention.sliding_window": 32, "attn_logit_softcapping": 50, "final_logit_softcapping": 30}, layers: 2, dim: 256, heads: 8, hd: 64}
	b := describe("gemma2", g2)
	require.Equal(t, Block{RopeStyle: RopeNeoX, Activation: GeGLU, PostNorms: true, EmbedScale: 16,
		AttnSoftcap: 50, FinalSoftcap: 30, Window: 32, WindowPattern: 2}, b)
	require.True(t, b.Local(0))
	require.False(t, b.Local(1))
	require.Equal(t, float32(1.0/8), b.Scale(64))
	g2.layers = 46 // Gemma 2 27B: query_pre_attn_scalar = dim/heads
	require.Equal(t, float32(1/math.Sqrt(32)), describe("gemma2", g2).Scale(64))

	g3 := meta{kv: map[string]float64{"attention.sliding_window": 16, "rope.freq_base_swa": 10000}, layers: 6, dim: 256, heads: 8, hd: 64}
	b = describe("gemma3", g3)
	b.Scaling = Scaling{Kind: ScalingLinear, Factor: 8}
	for l := range 6 {
		th, s := b.LayerRope(l, 1e6)
		if l < 5 {
			require.True(t, b.Local(l))
			require.Equal(t, float32(10000), th, "layer %d", l)
			require.Equal(t, Scaling{}, s, "local layers are not scaled")
		} else {
			require.False(t, b.Local(l))
			require.Equal(t, float32(1e6), th)
			require.Equal(t, b.Scaling, s)
		}
	}
}

func TestScalingFromMeta(t *testing.T) {
	m := meta{kv: map[string]float64{"rope.scaling.factor": 4, "rope.scaling.original_context_length": 32768}}
	s, err := ScalingFromMeta(m, "")
	require.NoError(t, err)
	require.Equal(t, Scaling{OrigContext: 32768}, s)
	s, err = ScalingFromMeta(m, "linear")
	require.NoError(t, err)
	require.Equal(t, Scaling{Kind: ScalingLinear, Factor: 4, OrigContext: 32768}, s)
	s, err = ScalingFromMeta(meta{kv: map[string]float64{}}, "")
	require.NoError(t, err)
	require.Equal(t, Scaling{}, s)
	// Phi-3.5's LongRoPE: no type, an attention factor and the original
	// context its factor tensors are chosen by.
	s, err = ScalingFromMeta(meta{kv: map[string]float64{"rope.scaling.attn_factor": 1.25, "rope.scaling.original_context_length": 4096}}, "")
	require.NoError(t, err)
	require.Equal(t, Scaling{OrigContext: 4096, Mscale: 1.25}, s)
	_, err = ScalingFromMeta(meta{kv: map[string]float64{"rope.scaling.attn_factor": 0}}, "")
	require.ErrorContains(t, err, "rope.scaling.attn_factor 0 must be positive")
	s, err = ScalingFromMeta(m, "yarn")
	require.NoError(t, err)
	require.Equal(t, Scaling{Kind: ScalingYaRN, Factor: 4, OrigContext: 32768, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}, s)
	_, err = ScalingFromMeta(m, "longrope")
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, `"longrope"`)
	_, err = ScalingFromMeta(meta{kv: map[string]float64{"rope.scaling.factor": -1}}, "linear")
	require.ErrorContains(t, err, "must be positive")
}

func TestBlockValidate(t *testing.T) {
	for _, b := range []Block{
		{RopeStyle: 7}, {Activation: 9}, {Window: -1}, {AttnSoftcap: -1},
		{Scaling: Scaling{Kind: ScalingLinear}}, {Scaling: Scaling{Kind: ScalingYaRN, Factor: 2}},
		{EmbedScale: float32(math.Inf(1))}, {Scaling: Scaling{Mscale: -1}}, {Scaling: Scaling{Mscale: float32(math.NaN())}},
	} {
		require.Error(t, b.Validate(), "%+v", b)
	}
}
