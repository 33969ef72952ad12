package arch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDescribeMoE pins the mixture-of-experts descriptions, from the
// metadata of the golden files (qwen3moe, mixtral, gptoss) and of the
// models' published configs (qwen2moe).
func TestDescribeMoE(t *testing.T) {
	for _, tc := range []struct {
		arch string
		kv   map[string]float64
		want Block
	}{
		{"qwen3moe", map[string]float64{"feed_forward_length": 512, "expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 128},
			Block{RopeStyle: RopeNeoX, QKNorm: true, MoE: MoE{Experts: 8, Used: 2, Hidden: 128, NormTopK: true}}},
		{"llama", map[string]float64{"feed_forward_length": 64, "expert_count": 8, "expert_used_count": 2},
			Block{MoE: MoE{Experts: 8, Used: 2, Hidden: 64, NormTopK: true}}},
		{"llama", map[string]float64{"feed_forward_length": 64}, Block{}},
		{"qwen2moe", map[string]float64{"feed_forward_length": 5632, "expert_count": 60, "expert_used_count": 4, "expert_feed_forward_length": 1408},
			Block{RopeStyle: RopeNeoX, MoE: MoE{Experts: 60, Used: 4, Hidden: 1408}}},
		// Without expert_feed_forward_length: feed_forward_length / used.
		{"qwen2moe", map[string]float64{"feed_forward_length": 5632, "expert_count": 60, "expert_used_count": 4},
			Block{RopeStyle: RopeNeoX, MoE: MoE{Experts: 60, Used: 4, Hidden: 1408}}},
		{"gpt-oss", map[string]float64{"feed_forward_length": 32, "expert_count": 8, "expert_used_count": 4, "expert_feed_forward_length": 32, "attention.sliding_window": 16},
			Block{RopeStyle: RopeNeoX, Activation: SwiGLUOAI, Window: 16, WindowPattern: 2,
				MoE: MoE{Experts: 8, Used: 4, Hidden: 32, Gating: GatingSoftmaxSelected}}},
		// GLM-4.5-Air's metadata (expert_gating_func 2: sigmoid).
		{"glm4moe", map[string]float64{"feed_forward_length": 10944, "expert_count": 128, "expert_used_count": 8, "expert_feed_forward_length": 1408,
			"leading_dense_block_count": 1, "expert_weights_scale": 1, "expert_weights_norm": 1, "expert_gating_func": 2},
			Block{RopeStyle: RopeNeoX, MoE: MoE{Experts: 128, Used: 8, Hidden: 1408, Gating: GatingSigmoid, NormTopK: true, WeightScale: 1, LeadingDense: 1}}},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			a, err := Lookup(tc.arch)
			require.NoError(t, err)
			var b Block
			require.NoError(t, a.Describe(meta{kv: tc.kv, layers: 2, dim: 256, heads: 8, hd: 64}, &b))
			require.NoError(t, b.Validate())
			require.Equal(t, tc.want, b)
		})
	}
	gptoss, err := Lookup("gpt-oss")
	require.NoError(t, err)
	require.Equal(t, "post_attention_norm", gptoss.FFNNorm)
	b := Block{Window: 16, WindowPattern: 2}
	require.True(t, b.Local(0), "gpt-oss: even layers are local")
	require.False(t, b.Local(1))
}

func TestMoEValidate(t *testing.T) {
	for _, tc := range []struct {
		m   MoE
		err string
	}{
		{MoE{}, ""},
		{MoE{Experts: 8, Used: 2, Hidden: 16}, ""},
		{MoE{Experts: 8, Used: 0, Hidden: 16}, "0 experts used of 8"},
		{MoE{Experts: 8, Used: 9, Hidden: 16}, "9 experts used of 8"},
		{MoE{Experts: 8, Used: 2}, "expert FFN width 0"},
		{MoE{Experts: 8, Used: 2, Hidden: 16, Gating: 7}, "expert gating 7"},
		{MoE{Experts: 8, Used: 2, Hidden: 16, LeadingDense: 3}, "3 leading dense layers of 2"},
		{MoE{Experts: 8, Used: 2, Hidden: 16, WeightScale: -1}, "expert weight scale -1"},
		{MoE{Used: 2}, "without experts"},
	} {
		err := tc.m.Validate(2)
		if tc.err == "" {
			require.NoError(t, err, "%+v", tc.m)
			continue
		}
		require.ErrorContains(t, err, tc.err, "%+v", tc.m)
	}
	b := Block{MoE: MoE{Experts: 4, Used: 1, Hidden: 8, LeadingDense: 1}}
	require.False(t, b.MoELayer(0))
	require.True(t, b.MoELayer(1))
	require.False(t, Block{}.MoELayer(0))
}

// A mixture-of-experts-only architecture refuses a file without experts,
// and GLM-4.5 what it cannot run, by name.
func TestMoEOnlyNeedsExperts(t *testing.T) {
	for _, name := range []string{"gpt-oss", "qwen3moe", "qwen2moe", "glm4moe"} {
		a, err := Lookup(name)
		require.NoError(t, err)
		var b Block
		require.ErrorContains(t, a.Describe(meta{kv: map[string]float64{"feed_forward_length": 32}, layers: 2}, &b), "expert_count is missing", name)
	}
	q, err := Lookup("qwen3moe")
	require.NoError(t, err)
	var qb Block
	// Group-limited selection needs the groups used, and groups that hold
	// the experts used.
	err = q.Describe(meta{kv: map[string]float64{"feed_forward_length": 32, "expert_count": 4, "expert_used_count": 2, "expert_group_count": 2}, layers: 2}, &qb)
	require.ErrorContains(t, err, "expert_group_used_count")
	err = q.Describe(meta{kv: map[string]float64{"feed_forward_length": 32, "expert_count": 8, "expert_used_count": 3, "expert_group_count": 4, "expert_group_used_count": 1}, layers: 2}, &qb)
	require.ErrorContains(t, err, "cannot hold")
	require.NoError(t, q.Describe(meta{kv: map[string]float64{"feed_forward_length": 32, "expert_count": 8, "expert_used_count": 2, "expert_group_count": 4, "expert_group_used_count": 2}, layers: 2}, &qb))
	require.Equal(t, MoE{Experts: 8, Used: 2, Hidden: 32, Gating: GatingSoftmax, NormTopK: true, Groups: 4, GroupsUsed: 2}, qb.MoE)
	glm, err := Lookup("glm4moe")
	require.NoError(t, err)
	require.True(t, glm.QKNormIfPresent)
	for kv, msg := range map[string]string{"expert_gating_func": "expert_gating_func 3", "rope.dimension_sections": "M-RoPE"} {
		var b Block
		err := glm.Describe(meta{kv: map[string]float64{kv: 3, "feed_forward_length": 32, "expert_count": 4, "expert_used_count": 2}, layers: 2}, &b)
		require.ErrorIs(t, err, ErrUnsupported)
		require.ErrorContains(t, err, msg)
	}
}
