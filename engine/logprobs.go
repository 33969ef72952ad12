package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/kvwarden/kvwarden/engine/sample"
)

// MaxTopLogprobs bounds Request.TopLogprobs (OpenAI's limit).
const MaxTopLogprobs = 20

// TokenLogprob is a token with its log-probability.
type TokenLogprob struct {
	Token   int
	Logprob float32
}

// TokenLogprobs is what a request with Logprobs records for one generated
// token: the token, its log-probability and, with TopLogprobs, the most
// likely tokens of that step (best first, ties by lower ID).
type TokenLogprobs struct {
	Token   int
	Logprob float32
	Top     []TokenLogprob
}

// Log-probabilities are those of the model's own distribution: the
// log-softmax of the raw logits of the step, before the repetition penalty,
// temperature and the top-k/top-p/min-p filters, as OpenAI and
// llama-cpp-python report them. So they do not depend on the sampling
// settings, and a token the filters removed still has its model
// probability.

// checkLogprobs validates the logprob options of req (before admission).
func checkLogprobs(req Request) error {
	if req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs {
		return fmt.Errorf("%w: top logprobs %d, want 0 to %d", ErrInvalidParams, req.TopLogprobs, MaxTopLogprobs)
	}
	return nil
}

// logprobOpts is what a seq records beside its tokens.
type logprobOpts struct {
	on         bool // per-token log-probabilities
	top        int  // how many alternatives per token
	lastLogits bool // keep the raw logits of the last step
	prompt     bool // the prompt tokens' log-probabilities too
}

func logprobOptsOf(req Request) logprobOpts {
	return logprobOpts{on: req.Logprobs || req.TopLogprobs > 0, top: req.TopLogprobs, lastLogits: req.LastLogits,
		prompt: req.PromptLogprobs}
}

// checkLogitBias refuses logit_bias entries for tokens outside the
// vocabulary (the sampler checks the rest).
func checkLogitBias(p sample.Params, vocab int) error {
	for _, id := range slices.Sorted(maps.Keys(p.LogitBias)) {
		if id >= vocab {
			return fmt.Errorf("%w: logit_bias: token %d is outside the vocabulary of %d", ErrInvalidParams, id, vocab)
		}
	}
	return nil
}

// Prompt log-probabilities: the log-probability of prompt token i comes
// from the logits after token i-1. The forward pass computes logits for
// the last token of a sequence's chunk only, so a sequence that still
// needs them is prefilled one token at a time up to the position it
// records next (promptChunk), asking for logits each time (wantLogits),
// and is never given prefix-cache pages, whose logits nobody computed.
// This works the same on every runner; it costs a step per prompt token.

// needsPromptLogits reports whether s still has prompt positions to record.
func (s *seq) needsPromptLogits() bool {
	return s.lp.prompt && s.promptNext < len(s.prompt)
}

// promptChunk bounds a prefill chunk of n tokens from position fed so
// that it ends right before the next prompt position to record.
func (s *seq) promptChunk(fed, n int) int {
	if !s.needsPromptLogits() {
		return n
	}
	return min(n, max(1, s.promptNext-fed))
}

// wantLogits reports whether a chunk ending at fed (exclusive) needs logits.
func (s *seq) wantLogits(end int) bool {
	return end == len(s.tokens) || (s.needsPromptLogits() && end == s.promptNext)
}

// recordPrompt records prompt position s.fed from logits, the output of a
// chunk that ended right before it.
func (sc *scheduler) recordPrompt(s *seq, logits []float32) {
	if !s.needsPromptLogits() || s.fed != s.promptNext || logits == nil {
		return
	}
	if s.promptLP == nil {
		s.promptLP = make([]TokenLogprobs, len(s.prompt)-1)
	}
	tok := s.prompt[s.fed]
	lse := logSumExp(logits)
	s.promptLP[s.fed-1] = TokenLogprobs{Token: tok, Logprob: logprobOf(logits, tok, lse), Top: topLogprobs(logits, s.lp.top, lse)}
	s.promptNext++
}

// promptLogprobs is what the Result reports: nil unless asked for and
// complete.
func (s *seq) promptLogprobs() []TokenLogprobs {
	if !s.lp.prompt || s.needsPromptLogits() {
		return nil
	}
	if s.promptLP == nil {
		return []TokenLogprobs{}
	}
	return s.promptLP
}

// sample draws s's next token from logits, recording what s asked for
// from the raw logits first (the sampler penalizes them in place).
func (sc *scheduler) sample(s *seq, logits []float32) int {
	if s.lp.lastLogits {
		s.lastLogits = append(s.lastLogits[:0], logits...)
	}
	if !s.lp.on {
		return s.draw(logits)
	}
	s.lpRaw = append(s.lpRaw[:0], logits...)
	tok := s.draw(logits)
	lse := logSumExp(s.lpRaw)
	s.lpPending = TokenLogprobs{Token: tok, Logprob: logprobOf(s.lpRaw, tok, lse), Top: topLogprobs(s.lpRaw, s.lp.top, lse)}
	return tok
}

// event builds the Event of a generated token, with its log-probabilities
// when s records them (and keeps them for the Result).
func (s *seq) event(tok int, text string) Event {
	ev := Event{Token: tok, Text: text}
	if s.generated == 1 && s.lp.prompt {
		ev.PromptLogprobs = s.promptLogprobs()
	}
	if s.lp.on && s.lpPending.Token == tok {
		ev.Logprob, ev.TopLogprobs = s.lpPending.Logprob, s.lpPending.Top
		s.logprobs = append(s.logprobs, s.lpPending)
	}
	return ev
}

// logSumExp is log(sum(exp(x))) over the finite-or-infinite values of x,
// NaN counting as -Inf (as the sampler counts it).
func logSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if f := float64(v); f > m {
			m = f
		}
	}
	if math.IsInf(m, 0) {
		return m
	}
	var sum float64
	for _, v := range x {
		if f := float64(v); f == f {
			sum += math.Exp(f - m)
		}
	}
	return m + math.Log(sum)
}

func logprobOf(x []float32, tok int, lse float64) float32 {
	if tok < 0 || tok >= len(x) || x[tok] != x[tok] {
		return float32(math.Inf(-1))
	}
	return float32(float64(x[tok]) - lse)
}

// topLogprobs returns the k most likely tokens of x, best first, ties by
// lower ID; NaN logits are never among them.
func topLogprobs(x []float32, k int, lse float64) []TokenLogprob {
	if k <= 0 {
		return nil
	}
	k = min(k, len(x))
	// A small sorted insertion list: k is at most MaxTopLogprobs.
	top := make([]TokenLogprob, 0, k+1)
	for id, v := range x {
		if v != v {
			continue
		}
		if len(top) == k && v <= top[k-1].Logprob {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, v, func(t TokenLogprob, v float32) int {
			if t.Logprob >= v { // equal values keep the earlier (lower) ID first
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, TokenLogprob{Token: id, Logprob: v})
		if len(top) > k {
			top = top[:k]
		}
	}
	for i := range top {
		top[i].Logprob = float32(float64(top[i].Logprob) - lse)
	}
	return top
}
