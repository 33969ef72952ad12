package arch

func init() {
	Register(Arch{
		Name:   "phi3",
		Models: "Phi-3 / Phi-3.5 (mini, medium; 4k, and 128k with LongRoPE), Phi-4-mini (partial rotary)",
		// Llama's block with NeoX RoPE, Q/K/V fused into attn_qkv and the
		// gate and up projections fused into ffn_up (gate rows first). The
		// loader splits both into views. phi3.attention.sliding_window is
		// ignored, as llama.cpp ignores it. Phi-3/3.5 128k's LongRoPE
		// factor tensors (rope_factors_long/short) and attention factor are
		// read for every architecture (Weights.RopeFactors, Scaling.Mscale).
		FusedQKV:    true,
		FusedGateUp: true,
		Describe: func(_ Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			return nil
		},
	})
}
