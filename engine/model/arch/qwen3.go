package arch

func init() {
	Register(Arch{
		Name:   "qwen3",
		Models: "Qwen3 (dense)",
		// Qwen2's block without biases, with per-head RMSNorm of Q and K
		// before RoPE; head dim may differ from dim/heads (key_length).
		Describe: func(_ Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			b.QKNorm = true
			return nil
		},
	})
}
