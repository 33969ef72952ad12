package arch

func init() {
	Register(Arch{
		Name:   "qwen2",
		Models: "Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen",
		// Llama's block with Q/K/V biases (used because the file has them)
		// and NeoX RoPE.
		Describe: func(_ Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			return nil
		},
	})
}
