package arch

import (
	"fmt"
	"math"
)

func init() {
	Register(Arch{
		Name:   "deepseek2",
		Models: "DeepSeek-V2, DeepSeek-V2-Lite, DeepSeek-V2.5, DeepSeek-V3, DeepSeek-R1 (Kimi-K2's block too)",
		// Multi-head latent attention (Block.MLA) with normal (adjacent-
		// pair) RoPE over the rope.dimension_count rotated values only; the
		// first leading_dense_block_count layers have a dense FFN, the rest
		// an MoE FFN with shared experts: softmax (V2) or sigmoid with the
		// selection bias exp_probs_b (V3) router, group-limited selection
		// where the file has expert groups, weights normalised when
		// expert_weights_norm and scaled by expert_weights_scale.
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeAdjacent
			if !m.Has("attention.key_length_mla") || !m.Has("attention.value_length_mla") {
				return fmt.Errorf("%w: deepseek2 without attention.key_length_mla / value_length_mla (a conversion with the unsplit attn_kv_b from before llama.cpp's MLA layout; convert the model again for attn_k_b and attn_v_b)", ErrUnsupported)
			}
			if m.Has("attention.temperature_scale") {
				return fmt.Errorf("%w: deepseek2 attention.temperature_scale (Mistral-Large-style attention temperature tuning)", ErrUnsupported)
			}
			var err error
			var keyMLA, kvHeads, ropeDim int
			get := func(dst *int, key string, def int) {
				if err == nil {
					*dst, err = m.Uint(key, def)
				}
			}
			ml := &b.MLA
			get(&ml.QRank, "attention.q_lora_rank", 0)
			get(&ml.KVRank, "attention.kv_lora_rank", -1)
			get(&keyMLA, "attention.key_length_mla", -1)
			get(&ml.VDim, "attention.value_length_mla", -1)
			get(&ropeDim, "rope.dimension_count", -1)
			get(&kvHeads, "attention.head_count_kv", -1)
			if err != nil {
				return err
			}
			ml.Nope = keyMLA - ropeDim
			switch {
			case kvHeads != 1:
				return fmt.Errorf("%w: deepseek2 attention.head_count_kv %d (the latent attention layout has one KV head)", ErrUnsupported, kvHeads)
			case ml.KVRank <= 0 || ml.VDim <= 0 || ml.Nope <= 0:
				return fmt.Errorf("model: deepseek2 kv_lora_rank %d, value_length_mla %d, key_length_mla %d with %d rotated dims", ml.KVRank, ml.VDim, keyMLA, ropeDim)
			case m.HeadDim() != ml.KVRank+ropeDim:
				return fmt.Errorf("model: deepseek2 attention.key_length %d is not kv_lora_rank %d + rope.dimension_count %d", m.HeadDim(), ml.KVRank, ropeDim)
			}
			if m.Has("rope.scaling.yarn_log_multiplier") {
				v, err := m.Float("rope.scaling.yarn_log_multiplier", 0, true)
				if err != nil {
					return err
				}
				// The converter writes 0.1*mscale_all_dim; llama.cpp
				// divides the factor out again.
				b.Scaling.YarnLogMul = float32(v) / 0.1
			}
			b.AttnScale = b.Scaling.MLAScale(keyMLA)
			if math.IsNaN(float64(b.AttnScale)) || !(b.AttnScale > 0) {
				return fmt.Errorf("model: deepseek2 attention scale %g from rope scaling %+v", b.AttnScale, b.Scaling)
			}

			g, err := m.Uint("expert_gating_func", 0)
			if err != nil {
				return err
			}
			// No key (0): DeepSeek V2 / V2.5 files, softmax.
			gating := map[int]Gating{0: GatingSoftmax, 1: GatingSoftmax, 2: GatingSigmoid}
			gt, ok := gating[g]
			if !ok {
				return fmt.Errorf("%w: deepseek2 expert_gating_func %d (supported: 1 softmax, 2 sigmoid)", ErrUnsupported, g)
			}
			norm, err := m.Bool("expert_weights_norm", false)
			if err != nil {
				return err
			}
			hidden, err := m.Uint("expert_feed_forward_length", -1)
			if err != nil {
				return err
			}
			return moeOnly(MoEFromMeta(m, b, gt, norm, hidden), b)
		},
	})
}
