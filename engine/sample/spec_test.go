package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// uniform is a rand.Source whose Float64 is exactly r (a multiple of
// 2^-53): the test drives the sampler's one draw per token.
type uniform struct{ r float64 }

func (u *uniform) Uint64() uint64 { return uint64(u.r * (1 << 53)) }

// oracleDist is the sampler's target distribution computed independently,
// in float64, from its definition: tokens ordered by logit (then id), the
// k best kept, weights exp((l - l_best)/T), min-p dropping weights below
// MinP (the best weighs 1), top-p keeping the shortest head whose weight
// reaches TopP of the total, then normalised. allowed (nil = all) is a
// grammar mask.
func oracleDist(logits []float32, p Params, allowed func(int) bool) []float64 {
	ids := []int{}
	for i := range logits {
		if allowed == nil || allowed(i) {
			ids = append(ids, i)
		}
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return a - b
	})
	if p.TopK > 0 && p.TopK < len(ids) {
		ids = ids[:p.TopK]
	}
	w := make([]float64, len(ids))
	var z float64
	for i, id := range ids {
		w[i] = math.Exp((float64(logits[id]) - float64(logits[ids[0]])) / float64(p.Temperature))
		z += w[i]
	}
	keep := len(ids)
	var acc float64
	for i := range ids {
		if w[i] < float64(p.MinP) {
			keep = i
			break
		}
		acc += w[i]
		if p.TopP > 0 && p.TopP < 1 && acc >= float64(p.TopP)*z {
			keep = i + 1
			break
		}
	}
	out := make([]float64, len(logits))
	z = 0
	for i := range keep {
		z += w[i]
	}
	for i := range keep {
		out[ids[i]] = w[i] / z
	}
	return out
}

// TestDraftAcceptanceExact checks speculative decoding's acceptance rule
// at the sampler level, exactly rather than statistically. The engine
// (engine/spec.go) verifies a draft token t by drawing the position's
// token from the sampler as it would without speculation (Sample, or
// SampleMasked under a grammar; one draw) and accepting t when the draw
// is t. For a deterministic draft that is the standard speculative
// sampling rule: t accepted with probability p(t), and on rejection a
// token u != t with probability p(u) / (1 - p(t)). The sampler's draw is
// a function of its one uniform number r, so sweeping r over a fine grid
// measures each outcome's probability to within 2 grid steps; each is
// compared with the oracle's p.
func TestDraftAcceptanceExact(t *testing.T) {
	const vocab, grid = 64, 1 << 15
	rng := rand.New(rand.NewPCG(7, 7))
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	logits[9] = logits[3] // a tie, broken by id
	mask := make([]uint64, 1)
	for i := 0; i < vocab; i += 3 {
		mask[0] |= 1 << i
	}
	masked := func(i int) bool { return allowed(mask, i) }
	for _, tc := range []struct {
		name    string
		p       Params
		allowed func(int) bool
	}{
		{"temperature", Params{Temperature: 0.7}, nil},
		{"top-k", Params{Temperature: 1, TopK: 5}, nil},
		{"top-p", Params{Temperature: 1.2, TopP: 0.9}, nil},
		{"min-p", Params{Temperature: 0.8, MinP: 0.1}, nil},
		{"defaults", DefaultParams(), nil},
		{"grammar mask", Params{Temperature: 1, TopP: 0.95}, masked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := oracleDist(logits, tc.p, tc.allowed)
			// Drafts: the most likely token, a less likely survivor, and
			// one the filters (or the mask) exclude.
			best := slices.Index(want, slices.Max(want))
			var mid, out = -1, -1
			for i, q := range want {
				if q > 0 && q < want[best]/3 && mid < 0 {
					mid = i
				}
				if q == 0 && out < 0 {
					out = i
				}
			}
			drafts := []int{best}
			if mid >= 0 {
				drafts = append(drafts, mid)
			}
			if out >= 0 {
				drafts = append(drafts, out)
			}
			s := New(tc.p)
			src := &uniform{}
			s.rng = rand.New(src)
			scratch := make([]float32, vocab)
			counts := make([]int, vocab)
			for g := range grid {
				src.r = (float64(g) + 0.5) / grid
				copy(scratch, logits)
				var tok int
				if tc.allowed != nil {
					var err error
					tok, err = s.SampleMasked(scratch, nil, mask)
					require.NoError(t, err)
				} else {
					tok = s.Sample(scratch, nil)
				}
				counts[tok]++
			}
			const tol = 2.0 / grid
			for _, d := range drafts {
				acc := float64(counts[d]) / grid
				require.InDelta(t, want[d], acc, tol, "draft %d: P(accept) must be p(t)", d)
				rej := 1 - acc
				for u := range vocab {
					if u == d {
						continue
					}
					got := float64(counts[u]) / grid
					require.InDelta(t, want[u], got, tol, "draft %d: P(reject, then %d)", d, u)
					if rej > 0.05 {
						// The conditional on rejection: p renormalised without t.
						require.InDelta(t, want[u]/(1-want[d]), got/rej, 3*tol/rej, "draft %d: P(%d | rejected)", d, u)
					}
				}
			}
		})
	}
}
