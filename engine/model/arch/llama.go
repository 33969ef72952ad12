package arch

func init() {
	Register(Arch{
		Name:   "llama",
		Models: "Llama 2, Llama 3/3.1/3.2/3.3, Mistral 7B, Mistral Nemo/Small, SmolLM2, TinyLlama, DeepSeek-R1-Distill-Llama; with experts: Mixtral 8x7B/8x22B",
		// The Llama block is the zero Block: adjacent-pair RoPE (the GGUF
		// converter permutes Q/K rows for it), SwiGLU, no extra norms.
		// Llama 3.1+ RoPE scaling arrives as the rope_freqs tensor;
		// optional Q/K/V/O biases are used when present. A file with
		// expert_count (Mixtral) has an MoE FFN in every layer: softmax
		// router, top-k renormalised, experts feed_forward_length wide.
		Describe: func(m Meta, b *Block) error {
			hidden, err := m.Uint("feed_forward_length", 0)
			if err != nil {
				return err
			}
			return MoEFromMeta(m, b, GatingSoftmax, true, hidden)
		},
	})
}
