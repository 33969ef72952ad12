package arch

import "math"

func init() {
	Register(Arch{
		Name:   "gemma3",
		Models: "Gemma 3 (text)",
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			b.Activation = GeGLU
			b.PostNorms = true
			b.QKNorm = true
			b.EmbedScale = float32(math.Sqrt(float64(m.Dim())))
			// Five local layers per global one (llama.cpp's default; the
			// converter writes no pattern key). Local layers use their own
			// RoPE base and no RoPE scaling.
			var err error
			if b.Window, err = m.Uint("attention.sliding_window", 0); err != nil {
				return err
			}
			if b.WindowPattern, err = m.Uint("attention.sliding_window_pattern", 6); err != nil {
				return err
			}
			base, err := m.Float("rope.freq_base_swa", 10000, false)
			if err != nil {
				return err
			}
			b.LocalTheta = float32(base)
			b.LocalUnscaled = true
			// query_pre_attn_scalar: n_embd/n_head for the 27B model (62
			// layers), head_dim otherwise, as llama.cpp decides.
			if m.Layers() == 62 {
				b.AttnScale = float32(1 / math.Sqrt(float64(m.Dim()/m.Heads())))
			}
			return nil
		},
	})
}
