package arch

import "math"

func init() {
	Register(Arch{
		Name:   "gemma2",
		Models: "Gemma 2",
		Describe: func(m Meta, b *Block) error {
			b.RopeStyle = RopeNeoX
			b.Activation = GeGLU
			b.PostNorms = true
			// The GGUF converter stores the RMSNorm weights with Gemma's +1
			// already added, so no offset here.
			b.EmbedScale = float32(math.Sqrt(float64(m.Dim())))
			var err error
			get := func(dst *float32, key string, def float64) {
				if err == nil {
					var v float64
					v, err = m.Float(key, def, false)
					*dst = float32(v)
				}
			}
			get(&b.AttnSoftcap, "attn_logit_softcapping", 50)
			get(&b.FinalSoftcap, "final_logit_softcapping", 30)
			if err != nil {
				return err
			}
			// Even layers attend over a window, odd layers globally; the
			// same RoPE base everywhere.
			if b.Window, err = m.Uint("attention.sliding_window", 4096); err != nil {
				return err
			}
			b.WindowPattern = 2
			// query_pre_attn_scalar: n_embd/n_head for the 27B model (46
			// layers), head_dim otherwise, as llama.cpp decides.
			if m.Layers() == 46 {
				b.AttnScale = float32(1 / math.Sqrt(float64(m.Dim()/m.Heads())))
			}
			return nil
		},
	})
}
