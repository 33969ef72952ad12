package arch

func init() {
	Register(Arch{
		Name:   "qwen2moe",
		Models: "Qwen1.5-MoE, Qwen2-57B-A14B",
		// Qwen2's block (Q/K/V biases, NeoX RoPE) with an MoE FFN: softmax
		// router, top-k weights not renormalised, and a shared expert whose
		// output is scaled by sigmoid(ffn_gate_inp_shexp·x). Without
		// expert_feed_forward_length an expert is feed_forward_length /
		// expert_used_count wide, as llama.cpp assumes.
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			hidden, err := m.Uint("feed_forward_length", -1)
			if err != nil {
				return err
			}
			used, err := m.Uint("expert_used_count", 1)
			if err != nil {
				return err
			}
			return moeOnly(MoEFromMeta(m, b, GatingSoftmax, false, hidden/max(used, 1)), b)
		},
	})
}
