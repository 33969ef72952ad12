package sample

import (
	"errors"
	"math"
)

// ErrNoAllowedToken is returned by SampleMasked when the mask allows no
// token at all.
var ErrNoAllowedToken = errors.New("sample: the mask allows no token")

// ApplyMask sets to -Inf the logits of the tokens mask does not allow.
// mask is a bitset over token ids: bit id%64 of word id/64, as
// engine/grammar's Matcher.Allowed fills it; ids past the mask are
// disallowed.
func ApplyMask(logits []float32, mask []uint64) {
	inf := float32(math.Inf(-1))
	for i := range logits {
		if w := i >> 6; w >= len(mask) || mask[w]&(1<<(i&63)) == 0 {
			logits[i] = inf
		}
	}
}

func allowed(mask []uint64, id int) bool {
	return id >= 0 && id>>6 < len(mask) && mask[id>>6]&(1<<(id&63)) != 0
}

// SampleMasked is Sample restricted to the tokens mask allows (a grammar's
// next-token set): the others get -Inf before the penalty and the
// filters, so the distribution is renormalized over the allowed tokens.
// It never returns a disallowed token: when every allowed logit is -Inf or
// NaN it returns the lowest allowed id. Like Sample, it uses logits as
// scratch space.
func (s *Sampler) SampleMasked(logits []float32, history []int, mask []uint64) (int, error) {
	first := -1
	for i := range logits {
		if allowed(mask, i) {
			first = i
			break
		}
	}
	if first < 0 {
		return -1, ErrNoAllowedToken
	}
	ApplyMask(logits, mask)
	id := s.Sample(logits, history)
	if !allowed(mask, id) {
		return first, nil
	}
	return id, nil
}
