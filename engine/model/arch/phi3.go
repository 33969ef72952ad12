package arch

func init() {
	Register(Arch{
		Name:   "phi3",
		Models: "Phi-3 4k (mini, medium)",
		// Llama's block with NeoX RoPE, Q/K/V fused into attn_qkv and the
		// gate and up projections fused into ffn_up (gate rows first). The
		// loader splits both into views. phi3.attention.sliding_window is
		// ignored, as llama.cpp ignores it. Phi-3 128k's LongRoPE factor
		// tensors (rope_factors_long/short) are refused as unused tensors.
		FusedQKV:    true,
		FusedGateUp: true,
		Describe: func(_ Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			return nil
		},
	})
}
