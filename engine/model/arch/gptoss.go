package arch

func init() {
	Register(Arch{
		Name:   "gpt-oss",
		Models: "gpt-oss-20b, gpt-oss-120b",
		// Q/K/V/O biases and attention sinks (attn_sinks, one extra logit
		// per head in the softmax) come with the weights. Even layers attend
		// over a sliding window, odd ones globally; NeoX RoPE with YaRN. The
		// FFN is MoE in every layer: the router has a bias, the k largest
		// logits are selected and softmaxed among themselves, experts have
		// biases and the clamped SwiGLU. The pre-FFN norm is stored as
		// post_attention_norm.
		FFNNorm: "post_attention_norm",
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			b.Activation = SwiGLUOAI
			var err error
			if b.Window, err = m.Uint("attention.sliding_window", 0); err != nil {
				return err
			}
			if b.WindowPattern, err = m.Uint("attention.sliding_window_pattern", 2); err != nil {
				return err
			}
			hidden, err := m.Uint("feed_forward_length", -1)
			if err != nil {
				return err
			}
			return moeOnly(MoEFromMeta(m, b, GatingSoftmaxSelected, false, hidden), b)
		},
	})
}
