package cli

import "github.com/kvwarden/kvwarden/engine/sample"

// SamplingParams builds the engine's sampling parameters from the knobs the
// CLI and the HTTP API expose. Temperature 0 is greedy. Min-p and the
// repetition penalty are off. A nil seed lets the engine pick one per
// request; any given seed, 0 included, is fixed.
func SamplingParams(temperature float64, topK int, topP float64, seed *uint64) sample.Params {
	if topP == 0 {
		topP = 1
	}
	p := sample.Params{
		Temperature:   float32(temperature),
		TopK:          topK,
		TopP:          float32(topP),
		RepeatPenalty: 1,
	}
	if seed != nil {
		p.Seed, p.HasSeed = *seed, true
	}
	return p
}
