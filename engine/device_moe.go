package engine

import (
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gpu"
)

// cpuOnly is why device (as configured) resolved to CUDA must run w on
// the CPU instead: the CUDA runner refuses its block (mixture-of-experts
// models, gpu.ErrMoE) and the device was "auto", which promises a
// working backend rather than a specific one. nil when CUDA may run it, or
// when the user asked for "cuda" explicitly (gpu.New's refusal is then the
// answer).
func cpuOnly(device string, w *model.Weights) error {
	if device != "" && device != "auto" {
		return nil
	}
	return gpu.Supports(w)
}
