package engine

import (
	"math"
	"time"
)

// Draft length from prices (SpecDraft). A draft model's draft is not free
// as an n-gram's is: each drafted token costs a step of the draft model,
// and how much that is against a step of the model decides what pays. A
// quantized copy of the model as its draft (Q8_0 of an F16 model: about
// half its price per token, most drafts accepted) gains; an unrelated or
// too large draft model never gains, whatever its acceptance. So a
// sequence decoding alone (the case where a step's price is its own)
// weighs each draft length k by what it yields per unit of time,
//
//	E(k) / ((D(k) + V(k)) / P),  E(k) = (1 - a^(k+1)) / (1 - a)
//
// where a is the sequence's acceptance per draft token, D(k) the time of a
// drafting round of k tokens, V(k) of a step verifying k drafts and P of
// a plain step (one row, no draft): measured prices, moving averages of
// the steps the engine ran. The lengths weighed are the one the
// acceptance rule proposes (specSeq.verified: it doubles after full
// acceptance, so it explores longer drafts) and those already priced;
// an unpriced proposal is tried as is. When the best of them does not
// gain (below 1) the sequence does not draft: a probe of the proposed length, then the
// backoff of a rejected draft (skip 1, 2, 4 ... steps), in case the text
// becomes predictable. Until P is known, and in batches (where a step's
// price is shared), the acceptance rule alone decides.
type specCost struct {
	plain  avgDur                     // step of one decode row, no draft
	verify [MaxDraftTokens + 1]avgDur // step of one decode row and k drafts
	draft  [MaxDraftTokens + 1]avgDur // drafting round of k tokens, one sequence
}

// avgDur is an exponential moving average of durations.
type avgDur struct {
	v float64 // seconds
	n int     // samples
}

func (a *avgDur) add(d time.Duration) {
	const w = 0.25 // the newest sample's weight: the price moves with the context length and the load
	if a.n == 0 {
		a.v = d.Seconds()
	} else {
		a.v += w * (d.Seconds() - a.v)
	}
	a.n++
}

// step records the time of a forward step holding one decoding sequence
// with k drafts.
func (c *specCost) step(k int, d time.Duration) {
	if k == 0 {
		c.plain.add(d)
		return
	}
	c.verify[k].add(d)
}

// gain is what k drafts yield per plain step's time at acceptance a, and
// whether both prices of k are known.
func (c *specCost) gain(a float64, k int) (float64, bool) {
	if c.plain.n == 0 || c.verify[k].n == 0 || c.draft[k].n == 0 || c.plain.v <= 0 {
		return 0, false
	}
	e := (1 - math.Pow(a, float64(k+1))) / (1 - a)
	return e * c.plain.v / (c.draft[k].v + c.verify[k].v), true
}

// choose returns the draft length of the next step for a sequence of
// acceptance a (0 <= a < 1) whose acceptance rule proposes k, with at
// most kmax drafts, and whether drafting gains.
func (c *specCost) choose(a float64, k, kmax int) (int, bool) {
	if _, ok := c.gain(a, k); !ok {
		return k, true // not priced yet: try it
	}
	best, bestK := 0.0, k
	for j := 1; j <= kmax; j++ {
		if g, ok := c.gain(a, j); ok && g > best {
			best, bestK = g, j
		}
	}
	return bestK, best > 1
}

// specAcceptance tracks a sequence's acceptance per draft token: draft
// tokens accepted over draft tokens that faced the model (the accepted
// ones, and the first rejected one; those after it say nothing), decayed
// so that it follows the text, with a prior of one of each.
type specAcceptance struct{ acc, tried float64 }

func (s *specAcceptance) add(drafted, accepted int) {
	const keep = 0.8
	s.acc, s.tried = s.acc*keep+float64(accepted), s.tried*keep+float64(accepted)
	if accepted < drafted {
		s.tried++
	}
}

// rate is the estimate, below 1.
func (s *specAcceptance) rate() float64 { return min((s.acc+1)/(s.tried+2), 0.99) }
