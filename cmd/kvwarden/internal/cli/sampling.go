package cli

import "github.com/kvwarden/kvwarden/engine/sample"

// SamplingParams builds the engine's sampling parameters from the knobs the
// CLI and the HTTP API expose. Temperature 0 is greedy; top-p 0 is off, as
// are min-p and the repetition penalty (zero fields mean "not set"; the
// engine validates the rest at admission). A nil seed lets the engine pick
// one per request; any given seed, 0 included, is fixed.
func SamplingParams(temperature float64, topK int, topP float64, seed *uint64) sample.Params {
	p := sample.Params{
		Temperature: float32(temperature),
		TopK:        topK,
		TopP:        float32(topP),
	}
	if seed != nil {
		p.Seed, p.HasSeed = *seed, true
	}
	return p
}
