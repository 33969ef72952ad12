package arch

func init() {
	Register(Arch{
		Name:   "llama",
		Models: "Llama 2, Llama 3/3.1/3.2/3.3, Mistral 7B, Mistral Nemo/Small, SmolLM2, TinyLlama, DeepSeek-R1-Distill-Llama",
		// The Llama block is the zero Block: adjacent-pair RoPE (the GGUF
		// converter permutes Q/K rows for it), SwiGLU, no extra norms.
		// Llama 3.1+ RoPE scaling arrives as the rope_freqs tensor;
		// optional Q/K/V/O biases are used when present.
		Describe: func(Meta, *Block) error { return nil },
	})
}
