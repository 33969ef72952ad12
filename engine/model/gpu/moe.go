package gpu

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// ErrMoE is wrapped by the error New returns for a model whose block the
// CUDA forward pass does not implement: mixture-of-experts FFNs, and the
// parts that come with the MoE architectures (attention sinks, gpt-oss's
// clamped SwiGLU). The CPU runner runs these models; the engine's device
// "auto" falls back to it. It matches model.ErrUnsupported (so the C API
// reports KVW_ERR_UNSUPPORTED) and model.ErrNotImplemented.
var ErrMoE error = moeError{}

type moeError struct{}

func (moeError) Error() string {
	return "gpu: mixture-of-experts models are not implemented on CUDA (device cpu or auto runs them on the CPU)"
}

func (moeError) Unwrap() []error { return []error{model.ErrUnsupported, model.ErrNotImplemented} }

// Supports reports, as an error wrapping ErrMoE, why the CUDA runner
// cannot run w; nil when it can (as far as the block description goes).
func Supports(w *model.Weights) error {
	if w.Encoder != nil || w.Config.NonCausal {
		return fmt.Errorf("gpu: encoders and non-causal attention are not implemented on CUDA (use the CPU): %w", model.ErrNotImplemented)
	}
	if w.Config.Pooling != model.PoolingUnset {
		// The CUDA runner returns logits, not the hidden states an
		// embedding model is for: device auto runs it on the CPU.
		return fmt.Errorf("gpu: embedding models (%s.pooling_type %v) are not implemented on CUDA (use the CPU): %w", w.Config.Arch, w.Config.Pooling, model.ErrNotImplemented)
	}
	if err := supportsConfig(w.Config); err != nil {
		return err
	}
	for i, l := range w.Layers {
		if l.Sinks != nil {
			return fmt.Errorf("%w: layer %d has attention sinks", ErrMoE, i)
		}
		if l.MoE != nil {
			return fmt.Errorf("%w: layer %d has %d experts", ErrMoE, i, len(l.MoE.Gate))
		}
	}
	return nil
}

func supportsConfig(c model.Config) error {
	b := c.Block
	switch {
	case b.MoE.Experts > 0:
		return fmt.Errorf("%w: %s has %d experts (%d used per token)", ErrMoE, c.Arch, b.MoE.Experts, b.MoE.Used)
	case b.Activation == arch.SwiGLUOAI:
		return fmt.Errorf("%w: activation %v", ErrMoE, b.Activation)
	}
	return nil
}
