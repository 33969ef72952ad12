package sample

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidatePenaltiesAndBias(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		mod  func(*Params)
		want string // "" means valid
	}{
		{"presence at bounds", func(p *Params) { p.PresencePenalty = -2 }, ""},
		{"frequency at bounds", func(p *Params) { p.FrequencyPenalty = 2 }, ""},
		{"presence above", func(p *Params) { p.PresencePenalty = 2.5 }, "presence_penalty = 2.5"},
		{"presence nan", func(p *Params) { p.PresencePenalty = nan }, "presence_penalty = NaN"},
		{"frequency below", func(p *Params) { p.FrequencyPenalty = -2.01 }, "frequency_penalty = -2.01"},
		{"bias at bounds", func(p *Params) { p.LogitBias = map[int]float32{0: -100, 5: 100} }, ""},
		{"bias negative id", func(p *Params) { p.LogitBias = map[int]float32{3: 1, -1: 1} }, "logit_bias = -1, want token IDs >= 0"},
		{"bias above", func(p *Params) { p.LogitBias = map[int]float32{7: 100.5} }, "logit_bias = 100.5, want a bias in [-100, 100] (token 7)"},
		{"bias nan", func(p *Params) { p.LogitBias = map[int]float32{2: nan} }, "logit_bias = NaN"},
		{"bias lowest bad id first", func(p *Params) { p.LogitBias = map[int]float32{9: 200, 4: -300} }, "(token 4)"},
		{"too many entries", func(p *Params) {
			p.LogitBias = map[int]float32{}
			for i := range MaxLogitBiasEntries + 1 {
				p.LogitBias[i] = 1
			}
		}, "at most 1024 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := params(tc.mod).Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidParams)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// oracle applies OpenAI's documented formulas: logit += bias (-100 bans),
// then logit -= count*frequency + (count > 0)*presence over the tokens
// after the prompt.
func oracle(logits []float32, history []int, promptLen int, p Params) []float32 {
	out := slices.Clone(logits)
	for id, b := range p.LogitBias {
		if b == -100 {
			out[id] = float32(math.Inf(-1))
		} else {
			out[id] += b
		}
	}
	count := map[int]int{}
	for _, id := range history[promptLen:] {
		count[id]++
	}
	for id, c := range count {
		out[id] -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
	}
	return out
}

func TestPenaltiesExact(t *testing.T) {
	logits := []float32{2, 1.5, 1, 0.5, -1, 3}
	// The prompt (4 tokens) holds token 5 twice: it is not penalized.
	history := []int{5, 5, 0, 1, 0, 0, 2, 1, 0}
	const promptLen = 4
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"presence", Params{PresencePenalty: 0.7}},
		{"frequency", Params{FrequencyPenalty: 0.4}},
		{"both", Params{PresencePenalty: 1.5, FrequencyPenalty: 0.25}},
		{"negative encourages", Params{PresencePenalty: -1, FrequencyPenalty: -0.5}},
		{"bias", Params{LogitBias: map[int]float32{3: 2.5, 4: -100, 1: -0.5}}},
		{"all", Params{PresencePenalty: 0.3, FrequencyPenalty: 0.2, LogitBias: map[int]float32{2: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := oracle(logits, history, promptLen, tc.p)
			s := New(tc.p)
			s.SetPromptLen(promptLen)
			got := slices.Clone(logits)
			s.Sample(got, history) // penalizes in place
			require.Equal(t, want, got)
			require.Equal(t, Argmax(want), New(tc.p).Sample(slices.Clone(want), nil))

			// The distribution is the softmax of the oracle's logits.
			tp := tc.p
			tp.Temperature, tp.TopP = 0.5, 1
			s = New(tp)
			s.SetPromptLen(promptLen)
			l := slices.Clone(logits)
			s.bias(l)
			s.penalizeGenerated(l, history)
			var xs []float64
			for _, v := range want {
				xs = append(xs, float64(v))
			}
			exp := softmax(0.5, xs...)
			for _, c := range s.distribution(l) {
				if exp[c.id] == 0 {
					require.Zero(t, c.p, "token %d is banned", c.id)
					continue
				}
				require.InEpsilon(t, exp[c.id], c.p, 1e-6, "token %d", c.id) // the sampler subtracts the max in float32
			}
		})
	}
}

// TestPenaltiesDirection: a positive penalty lowers the probability of the
// generated tokens and raises the others'; a negative one does the
// opposite; tokens of the prompt do not count.
func TestPenaltiesDirection(t *testing.T) {
	logits := []float32{1, 1, 1, 1}
	history := []int{3, 3, 3, 0, 0, 1} // prompt: [3 3 3]
	probs := func(p Params) map[int]float64 {
		p.Temperature, p.TopP = 1, 1
		s := New(p)
		s.SetPromptLen(3)
		l := slices.Clone(logits)
		s.bias(l)
		s.penalizeGenerated(l, history)
		out := map[int]float64{}
		for _, c := range s.distribution(l) {
			out[int(c.id)] = c.p
		}
		return out
	}
	base := probs(Params{})
	for _, pp := range []Params{{PresencePenalty: 1}, {FrequencyPenalty: 1}} {
		got := probs(pp)
		require.Less(t, got[0], base[0])
		require.Less(t, got[1], base[1])
		require.Greater(t, got[2], base[2])
		require.Greater(t, got[3], base[3], "prompt tokens are not penalized")
	}
	// Frequency: token 0 (twice) loses more than token 1 (once); presence
	// treats them alike.
	f := probs(Params{FrequencyPenalty: 1})
	require.Less(t, f[0], f[1])
	pr := probs(Params{PresencePenalty: 1})
	require.InDelta(t, pr[0], pr[1], 1e-15)
	neg := probs(Params{PresencePenalty: -1})
	require.Greater(t, neg[0], base[0])
}

// TestLogitBiasBanAndForce: -100 bans a token whatever the temperature;
// +100 makes it the only likely one.
func TestLogitBiasBanAndForce(t *testing.T) {
	logits := []float32{5, 4, 3, 2, 1}
	for seed := range uint64(200) {
		p := Params{Temperature: 2, TopP: 1, Seed: seed, LogitBias: map[int]float32{0: -100}}
		require.NotEqual(t, 0, New(p).Sample(slices.Clone(logits), nil))
		p.LogitBias = map[int]float32{4: 100}
		require.Equal(t, 4, New(p).Sample(slices.Clone(logits), nil))
	}
	// Greedy: banning the best token picks the next one.
	require.Equal(t, 1, New(Params{LogitBias: map[int]float32{0: -100}}).Sample(slices.Clone(logits), nil))
	// An ID past the logits is ignored (the engine refuses it earlier).
	require.Equal(t, 0, New(Params{LogitBias: map[int]float32{99: 100}}).Sample(slices.Clone(logits), nil))
}
