package arch

import "fmt"

func init() {
	Register(Arch{
		Name:   "glm4moe",
		Models: "GLM-4.5, GLM-4.5-Air, GLM-4.6",
		// Q/K/V biases, NeoX RoPE over the first rope.dimension_count
		// dimensions of a head (partial rotary), Q/K norm where the file
		// has it (the 355B model). The first leading_dense_block_count
		// layers have a dense FFN, the others an MoE FFN: sigmoid router
		// with a selection bias (exp_probs_b), weights normalised
		// (expert_weights_norm) and scaled (expert_weights_scale), plus an
		// unweighted shared expert. The pre-FFN norm is stored as
		// post_attention_norm. The nextn_predict_layers trailing layers
		// (multi-token prediction) are not part of the forward pass and are
		// skipped, as llama.cpp skips them.
		FFNNorm:         "post_attention_norm",
		QKNormIfPresent: true,
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			if m.Has("rope.dimension_sections") {
				return fmt.Errorf("%w: glm4moe with rope.dimension_sections (multimodal M-RoPE)", ErrUnsupported)
			}
			g, err := m.Uint("expert_gating_func", 2)
			if err != nil {
				return err
			}
			gating := map[int]Gating{0: GatingSigmoid, 1: GatingSoftmax, 2: GatingSigmoid}
			gt, ok := gating[g]
			if !ok {
				return fmt.Errorf("%w: glm4moe expert_gating_func %d (supported: 1 softmax, 2 sigmoid)", ErrUnsupported, g)
			}
			norm, err := m.Bool("expert_weights_norm", false)
			if err != nil {
				return err
			}
			hidden, err := m.Uint("feed_forward_length", -1)
			if err != nil {
				return err
			}
			used, err := m.Uint("expert_used_count", 1)
			if err != nil {
				return err
			}
			return moeOnly(MoEFromMeta(m, b, gt, norm, hidden/max(used, 1)), b)
		},
	})
}
