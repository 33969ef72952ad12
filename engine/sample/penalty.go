package sample

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// MaxPenalty bounds PresencePenalty and FrequencyPenalty (OpenAI's range).
const MaxPenalty = 2

// MaxLogitBias bounds the values of LogitBias (OpenAI's range); a bias of
// -MaxLogitBias bans the token.
const MaxLogitBias = 100

// MaxLogitBiasEntries bounds len(LogitBias) (OpenAI allows 300; the extra
// room costs nothing but keeps a request from carrying a vocabulary-sized
// map).
const MaxLogitBiasEntries = 1024

func (p Params) validateBias() error {
	if len(p.LogitBias) > MaxLogitBiasEntries {
		return &ParamError{Param: "logit_bias", Value: len(p.LogitBias), Want: fmt.Sprintf("at most %d entries", MaxLogitBiasEntries)}
	}
	// Check in ID order, so the error does not depend on map order.
	for _, id := range slices.Sorted(maps.Keys(p.LogitBias)) {
		if id < 0 {
			return &ParamError{Param: "logit_bias", Value: id, Want: "token IDs >= 0"}
		}
		if b := p.LogitBias[id]; !(b >= -MaxLogitBias && b <= MaxLogitBias) {
			return &ParamError{Param: "logit_bias", Value: b, Want: fmt.Sprintf("a bias in [-100, 100] (token %d)", id)}
		}
	}
	return nil
}

// SetPromptLen tells the Sampler that the first n tokens of the history it
// is given are the prompt: the presence and frequency penalties count only
// the tokens after them (OpenAI counts the generated text).
func (s *Sampler) SetPromptLen(n int) { s.promptLen = max(n, 0) }

// bias adds LogitBias in place; -MaxLogitBias bans the token outright, so
// that no temperature or filter can bring it back.
func (s *Sampler) bias(logits []float32) {
	for id, b := range s.p.LogitBias {
		if id < 0 || id >= len(logits) {
			continue
		}
		if b <= -MaxLogitBias {
			logits[id] = float32(math.Inf(-1))
		} else {
			logits[id] += b
		}
	}
}

// penalizeGenerated applies the presence and frequency penalties in place:
// logit -= count*frequency + presence for each token generated count > 0
// times.
func (s *Sampler) penalizeGenerated(logits []float32, history []int) {
	pres, freq := s.p.PresencePenalty, s.p.FrequencyPenalty
	if (pres == 0 && freq == 0) || s.promptLen >= len(history) {
		return
	}
	s.seen = append(s.seen[:0], history[s.promptLen:]...)
	slices.Sort(s.seen)
	for i := 0; i < len(s.seen); {
		id, j := s.seen[i], i+1
		for j < len(s.seen) && s.seen[j] == id {
			j++
		}
		if id >= 0 && id < len(logits) {
			logits[id] -= float32(j-i)*freq + pres
		}
		i = j
	}
}
