package arch

func init() {
	Register(Arch{
		Name:   "qwen3moe",
		Models: "Qwen3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B)",
		// Qwen3's block with an MoE FFN in every layer: softmax router,
		// top-k renormalised (norm_topk_prob), no shared expert.
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			b.QKNorm = true
			hidden, err := m.Uint("feed_forward_length", -1)
			if err != nil {
				return err
			}
			return moeOnly(MoEFromMeta(m, b, GatingSoftmax, true, hidden), b)
		},
	})
}
