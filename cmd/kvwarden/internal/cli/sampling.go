package cli

import "github.com/kvwarden/kvwarden/engine/sample"

// SamplingParams builds the engine's sampling parameters from the knobs the
// CLI and the HTTP API expose. Temperature 0 is greedy; top-p 0 is off, as
// are min-p and the repetition penalty (zero fields mean "not set"; the
// engine validates the rest at admission).
func SamplingParams(temperature float64, topK int, topP float64, seed uint64) sample.Params {
	return sample.Params{
		Temperature: float32(temperature),
		TopK:        topK,
		TopP:        float32(topP),
		Seed:        seed,
	}
}
