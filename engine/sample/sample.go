// Package sample turns a row of logits into the next token: greedy,
// temperature, top-k, top-p (nucleus), min-p and a llama.cpp-style
// repetition penalty, with a per-request pseudo-random generator so that a
// seed gives the same tokens whatever else is in the batch.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrInvalidParams is wrapped by every error Params.Validate returns.
var ErrInvalidParams = errors.New("invalid sampling parameters")

// Params configures a Sampler.
type Params struct {
	// Temperature divides the logits before the softmax. 0 means greedy
	// (argmax, first maximum wins, as in llama2.c run.c); the filters are
	// then irrelevant. Must be finite and >= 0.
	Temperature float32
	// TopK keeps the K most likely tokens; 0 keeps all. Must be >= 0.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP. Must be in [0, 1]; 0 (not set) and 1 disable it.
	TopP float32
	// MinP drops tokens whose probability is below MinP times the most
	// likely token's. Must be in [0, 1]; 0 disables it.
	MinP float32
	// RepeatPenalty divides positive logits and multiplies non-positive ones
	// of tokens seen in the last RepeatLastN tokens of history (each token
	// once). Must be finite and >= 0; 0 (not set) and 1 disable it.
	RepeatPenalty float32
	// RepeatLastN is the penalty window: 0 disables the penalty, -1 uses the
	// whole history. Must be >= -1.
	RepeatLastN int
	// Seed seeds the request's generator when HasSeed is set: the same
	// seed (0 included) gives the same output. Without HasSeed the engine
	// picks a seed of its own per request (New itself always uses Seed).
	Seed    uint64
	HasSeed bool
	// PresencePenalty and FrequencyPenalty are OpenAI's penalties over the
	// generated tokens (not the prompt; see Sampler.SetPromptLen): a token
	// generated c > 0 times so far has its logit lowered by
	// c*FrequencyPenalty + PresencePenalty. Each in [-2, 2]; 0 disables.
	PresencePenalty  float32
	FrequencyPenalty float32
	// LogitBias adds a bias in [-100, 100] to the logit of a token ID, as
	// OpenAI's logit_bias; -100 bans the token (its logit becomes -Inf).
	// IDs must be >= 0 (the engine checks them against its vocabulary).
	LogitBias map[int]float32
}

// DefaultParams returns llama.cpp's default sampling settings: temperature
// 0.8, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty (1.0 over the
// last 64 tokens), no seed (random).
func DefaultParams() Params {
	return Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}

// Greedy returns parameters for greedy decoding (temperature 0): the zero
// Params, spelled out.
func Greedy() Params {
	return Params{TopP: 1, RepeatPenalty: 1}
}

// ParamError is an invalid sampling parameter. It wraps ErrInvalidParams;
// Param is the parameter's name as the OpenAI API spells it ("top_p"), so
// a front end can name its own flag or field.
type ParamError struct {
	Param string
	Value any
	Want  string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%v: %s = %v, want %s", ErrInvalidParams, e.Param, e.Value, e.Want)
}

func (e *ParamError) Unwrap() error { return ErrInvalidParams }

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// Validate reports the first invalid parameter. Errors wrap
// ErrInvalidParams and name the parameter and its value. The zero Params is
// valid: every field at zero means "not set" (greedy, no filter, no
// penalty), so this is the one place sampling parameters are checked and
// nobody patches zeros first.
func (p Params) Validate() error {
	bad := func(name string, v any, want string) error {
		return &ParamError{Param: name, Value: v, Want: want}
	}
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature", p.Temperature, "a finite value >= 0")
	case p.TopK < 0:
		return bad("top_k", p.TopK, ">= 0 (0 disables)")
	case !(p.TopP >= 0 && p.TopP <= 1):
		return bad("top_p", p.TopP, "a value in [0, 1] (0 or 1 disables)")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return bad("min_p", p.MinP, "a value in [0, 1] (0 disables)")
	case !finite(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return bad("repeat_penalty", p.RepeatPenalty, "a finite value >= 0 (0 or 1 disables)")
	case p.RepeatLastN < -1:
		return bad("repeat_last_n", p.RepeatLastN, ">= -1 (0 disables, -1 means all history)")
	case !(p.PresencePenalty >= -MaxPenalty && p.PresencePenalty <= MaxPenalty):
		return bad("presence_penalty", p.PresencePenalty, "a value in [-2, 2] (0 disables)")
	case !(p.FrequencyPenalty >= -MaxPenalty && p.FrequencyPenalty <= MaxPenalty):
		return bad("frequency_penalty", p.FrequencyPenalty, "a value in [-2, 2] (0 disables)")
	}
	return p.validateBias()
}

// Sampler draws tokens for one request. It owns the request's generator and
// scratch space: use one Sampler per request, from one goroutine at a time.
type Sampler struct {
	p    Params
	rng  *rand.Rand
	cand []cand
	seen []int
	// promptLen: history[promptLen:] are the generated tokens, which the
	// presence and frequency penalties count.
	promptLen int
}

// cand is a candidate token with its (penalized) logit and its probability
// (unnormalized, then normalized).
type cand struct {
	id    int32
	logit float32
	p     float64
}

// better orders candidates: higher logit first, then lower id.
func better(a, b cand) bool {
	if a.logit != b.logit {
		return a.logit > b.logit
	}
	return a.id < b.id
}

func cmpCand(a, b cand) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

// New returns a Sampler for p, its generator seeded with p.Seed. New does
// not validate p; call Validate first. Invalid values never cause a panic
// but give unspecified choices.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x9E3779B97F4A7C15))}
}

// Params returns the parameters the Sampler was made with.
func (s *Sampler) Params() Params { return s.p }

// Sample returns the next token for logits, given the tokens so far
// (history, prompt included, for the repetition penalty). It uses logits as
// scratch space: the repetition penalty is applied in place, so callers must
// not reuse the values afterwards. NaN logits count as -Inf. It returns -1
// for an empty logits slice.
//
// Order: logit bias, repetition penalty, presence and frequency penalties
// (llama.cpp's order), then (unless greedy) top-k, softmax with
// temperature, top-p, min-p, and one draw from the request's generator.
// Each non-greedy call draws exactly one number, so a request's tokens
// depend only on its seed and its own logits.
func (s *Sampler) Sample(logits []float32, history []int) int {
	if len(logits) == 0 {
		return -1
	}
	s.bias(logits)
	s.penalize(logits, history)
	s.penalizeGenerated(logits, history)
	if s.p.Temperature == 0 {
		return Argmax(logits)
	}
	c := s.distribution(logits)
	r := s.rng.Float64()
	if len(c) == 0 {
		return Argmax(logits)
	}
	var acc float64
	for _, x := range c {
		acc += x.p
		if r < acc {
			return int(x.id)
		}
	}
	return int(c[len(c)-1].id) // rounding: acc ended just below 1
}

// Argmax is the greedy choice: the index of the first maximum, as llama2.c's
// sample_argmax picks it, ignoring NaN (0 when all are NaN).
func Argmax(logits []float32) int {
	best := -1
	var bv float32
	for i, v := range logits {
		if v != v {
			continue
		}
		if best < 0 || v > bv {
			best, bv = i, v
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

// penalize applies the repetition penalty in place, once per distinct token
// of the window.
func (s *Sampler) penalize(logits []float32, history []int) {
	pen := s.p.RepeatPenalty
	if pen == 1 || s.p.RepeatLastN == 0 || len(history) == 0 || !(pen > 0) {
		return
	}
	win := history
	if n := s.p.RepeatLastN; n > 0 && n < len(win) {
		win = win[len(win)-n:]
	}
	s.seen = append(s.seen[:0], win...)
	slices.Sort(s.seen)
	for i, id := range s.seen {
		if (i > 0 && id == s.seen[i-1]) || id < 0 || id >= len(logits) {
			continue
		}
		if logits[id] <= 0 {
			logits[id] *= pen
		} else {
			logits[id] /= pen
		}
	}
}

// distribution returns the tokens that survive top-k, top-p and min-p with
// their probabilities (summing to 1), in the order Sample draws them: best
// first when a filter is active, by id otherwise. It returns nil when no
// finite maximum exists (all -Inf or NaN, or a +Inf logit). The result is
// scratch space owned by s.
func (s *Sampler) distribution(logits []float32) []cand {
	n := len(logits)
	k := s.p.TopK
	if k <= 0 || k > n {
		k = n
	}
	topP := float64(s.p.TopP)
	if !(topP > 0) || topP > 1 {
		topP = 1
	}
	minP := min(max(float64(s.p.MinP), 0), 1) // NaN becomes 0
	invT := 1 / float64(s.p.Temperature)

	var c []cand
	if k < n {
		c = s.topK(logits, k) // best first
	} else if minP > 0 && topP >= 1 {
		// Min-p alone: p >= minP*p_max is l >= max + T*ln(minP), so only
		// the survivors need exp and sorting.
		maxL := float32(math.Inf(-1))
		for _, v := range logits {
			if v > maxL { // false for NaN
				maxL = v
			}
		}
		cut := float64(maxL) + float64(s.p.Temperature)*math.Log(minP)
		c = s.cand[:0]
		for i, v := range logits {
			if float64(v) >= cut {
				c = append(c, cand{id: int32(i), logit: v})
			}
		}
		s.cand = c
		slices.SortFunc(c, cmpCand)
	} else {
		c = s.cand[:0]
		for i, v := range logits {
			if v != v {
				v = float32(math.Inf(-1))
			}
			c = append(c, cand{id: int32(i), logit: v})
		}
		s.cand = c
	}
	maxL := float32(math.Inf(-1))
	for _, x := range c {
		maxL = max(maxL, x.logit)
	}
	if math.IsInf(float64(maxL), 0) {
		return nil
	}
	// Unnormalized probabilities exp((l - max)/T): the best has 1.
	var z float64
	for i := range c {
		c[i].p = math.Exp(float64(c[i].logit-maxL) * invT)
		z += c[i].p
	}
	if topP < 1 || minP > 0 {
		if k == n && topP < 1 {
			// Sort only what can survive: min-p needs p >= minP (relative
			// to the best); top-p never needs a token with probability below
			// (1-top_p)/(n-1), since all of those together hold less than
			// 1-top_p.
			cut := minP
			if n > 1 {
				cut = max(cut, z*(1-topP)/float64(n-1))
			}
			j := 0
			for _, x := range c {
				if x.p >= cut {
					c[j] = x
					j++
				}
			}
			c = c[:j]
			// Find the nucleus by partitioning on probability mass, then
			// sort just the nucleus.
			c = c[:massSelect(c, topP*z)]
			slices.SortFunc(c, cmpCand)
		}
		keep := len(c)
		var acc float64
		for i, x := range c {
			if x.p < minP {
				keep = i
				break
			}
			acc += x.p
			if topP < 1 && acc >= topP*z {
				keep = i + 1
				break
			}
		}
		c = c[:keep]
		z = 0
		for _, x := range c {
			z += x.p
		}
	}
	for i := range c {
		c[i].p /= z
	}
	return c
}

// topK returns the k best candidates, best first, without sorting all of
// logits: a bounded heap for small k, quickselect otherwise.
func (s *Sampler) topK(logits []float32, k int) []cand {
	c := s.cand[:0]
	get := func(i int) cand {
		v := logits[i]
		if v != v {
			v = float32(math.Inf(-1))
		}
		return cand{id: int32(i), logit: v}
	}
	if k <= 256 {
		// Min-heap on "better": the root is the worst kept candidate.
		worse := func(a, b cand) bool { return better(b, a) }
		down := func(h []cand, i int) {
			for {
				l := 2*i + 1
				if l >= len(h) {
					return
				}
				if r := l + 1; r < len(h) && worse(h[r], h[l]) {
					l = r
				}
				if !worse(h[l], h[i]) {
					return
				}
				h[i], h[l] = h[l], h[i]
				i = l
			}
		}
		for i := range k {
			c = append(c, get(i))
		}
		for i := k/2 - 1; i >= 0; i-- {
			down(c, i)
		}
		for i := k; i < len(logits); i++ {
			x := get(i)
			if better(x, c[0]) {
				c[0] = x
				down(c, 0)
			}
		}
	} else {
		for i := range logits {
			c = append(c, get(i))
		}
		quickselect(c, k)
		c = c[:k]
	}
	slices.SortFunc(c, cmpCand)
	s.cand = c
	return c
}

// massSelect reorders c and returns L such that c[:L] holds the L best
// candidates and L is the smallest count whose probabilities (the p fields)
// sum to at least target (len(c) when they never do). It runs in expected
// linear time: a quickselect that descends by mass instead of by rank.
func massSelect(c []cand, target float64) int {
	lo, hi := 0, len(c) // c[:lo] is taken; the answer lies in (lo, hi]
	need := target
	for hi-lo > 16 {
		// Median of three to c[hi-1], then a Lomuto partition: better
		// candidates to the front.
		b := median3(c, lo, lo+(hi-lo)/2, hi-1)
		c[b], c[hi-1] = c[hi-1], c[b]
		pivot := c[hi-1]
		m := lo
		var mass float64
		for i := lo; i < hi-1; i++ {
			if better(c[i], pivot) {
				mass += c[i].p
				c[i], c[m] = c[m], c[i]
				m++
			}
		}
		c[m], c[hi-1] = c[hi-1], c[m]
		switch {
		case mass >= need:
			hi = m
		case mass+pivot.p >= need:
			return m + 1
		default:
			need -= mass + pivot.p
			lo = m + 1
		}
	}
	slices.SortFunc(c[lo:hi], cmpCand)
	for i := lo; i < hi; i++ {
		need -= c[i].p
		if need <= 0 {
			return i + 1
		}
	}
	return hi
}

// median3 returns whichever of indexes a, b, d holds the median candidate.
func median3(c []cand, a, b, d int) int {
	if better(c[a], c[b]) {
		switch {
		case better(c[b], c[d]):
			return b
		case better(c[a], c[d]):
			return d
		}
		return a
	}
	switch {
	case better(c[a], c[d]):
		return a
	case better(c[b], c[d]):
		return d
	}
	return b
}

// quickselect reorders c so that its first k elements are the k best.
func quickselect(c []cand, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		// Median of three as pivot.
		mid := lo + (hi-lo)/2
		if better(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if better(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if better(c[hi], c[mid]) {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid]
		i, j := lo, hi
		for i <= j {
			for better(c[i], pivot) {
				i++
			}
			for better(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}
