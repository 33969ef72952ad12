package model

import (
	"fmt"
	"strings"
)

// Pooling is how an embedding is made from the per-token hidden states of
// an input: GGUF's <arch>.pooling_type (llama.cpp's llama_pooling_type,
// which is this value minus one), or PoolingUnset, the zero value, for a
// file without the key (a plain generative model).
type Pooling int

const (
	PoolingUnset Pooling = iota
	PoolingNone          // one vector per token
	PoolingMean
	PoolingCLS  // the first token's
	PoolingLast // the last token's
	PoolingRank // a classification head over the first token (rerankers)
)

func (p Pooling) String() string {
	switch p {
	case PoolingUnset:
		return "unset"
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// ParsePooling reads a pooling name as llama.cpp's --pooling takes it
// (none, mean, cls, last, rank).
func ParsePooling(s string) (Pooling, error) {
	for p := PoolingNone; p <= PoolingRank; p++ {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return PoolingUnset, fmt.Errorf("model: pooling %q (want none, mean, cls, last or rank)", s)
}

// pooling reads <arch>.pooling_type and <arch>.attention.causal.
func (g *ggufLoader) pooling(c *Config) error {
	c.Pooling = PoolingUnset
	if g.Has("pooling_type") {
		v, err := g.uint("pooling_type", 0)
		if err != nil {
			return err
		}
		if v > int(PoolingRank-PoolingNone) {
			return fmt.Errorf("%w: gguf %s.pooling_type %d (known: 0 none to 4 rank)", ErrUnsupported, g.arch, v)
		}
		c.Pooling = PoolingNone + Pooling(v)
	}
	causal, err := g.Bool("attention.causal", true)
	if err != nil {
		return err
	}
	c.NonCausal = !causal
	return nil
}
