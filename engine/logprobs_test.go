package engine

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/sample"
)

func TestTopLogprobsOrderTiesAndNaN(t *testing.T) {
	nan := float32(math.NaN())
	x := []float32{1, 3, nan, 3, 2, float32(math.Inf(-1))}
	lse := logSumExp(x)
	want := math.Log(math.Exp(1) + 2*math.Exp(3) + math.Exp(2))
	require.InDelta(t, want, lse, 1e-9)

	top := topLogprobs(x, 3, lse)
	require.Equal(t, []int{1, 3, 4}, []int{top[0].Token, top[1].Token, top[2].Token}, "best first, ties by lower ID")
	require.InDelta(t, 3-want, top[0].Logprob, 1e-6)
	require.Len(t, topLogprobs(x, 10, lse), 5, "NaN is never a candidate")
	require.Nil(t, topLogprobs(x, 0, lse))
	require.True(t, math.IsInf(float64(logprobOf(x, 2, lse)), -1), "a NaN logit has probability 0")
	require.True(t, math.IsInf(float64(logprobOf(x, 99, lse)), -1))
}

// The recorded log-probabilities are the model's own distribution: the
// log-softmax of the raw logits, whatever the sampler does with them.
func TestLogprobsAreTheModelsDistribution(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()

	// A repetition penalty changes what greedy picks, not the reported
	// probabilities; the last step's logits let the test recompute them.
	req := Request{Prompt: "Hello", MaxTokens: 6, Logprobs: true, TopLogprobs: 5, LastLogits: true,
		Sampling: sample.Params{TopP: 1, RepeatPenalty: 1.3, RepeatLastN: -1}}
	st, err := e.Submit(t.Context(), req)
	require.NoError(t, err)
	var events []Event
	for ev := range st.Events() {
		if !ev.Done {
			events = append(events, ev)
		}
	}
	r := st.Wait()
	require.NoError(t, r.Err)
	require.Equal(t, "length", r.FinishReason)
	require.Len(t, r.Logprobs, len(r.Tokens))
	require.Len(t, events, len(r.Tokens))
	for i, lp := range r.Logprobs {
		require.Equal(t, r.Tokens[i], lp.Token)
		require.Equal(t, events[i].Logprob, lp.Logprob, "event %d", i)
		require.Equal(t, events[i].TopLogprobs, lp.Top, "event %d", i)
		require.Len(t, lp.Top, 5)
		require.LessOrEqual(t, lp.Logprob, float32(0))
		for j := 1; j < len(lp.Top); j++ {
			require.GreaterOrEqual(t, lp.Top[j-1].Logprob, lp.Top[j].Logprob)
		}
		var mass float64
		for _, c := range lp.Top {
			mass += math.Exp(float64(c.Logprob))
		}
		require.LessOrEqual(t, mass, 1+1e-5)
	}

	// The last step: recompute from the raw logits.
	logits := r.Logits
	require.Len(t, logits, e.ModelConfig().Vocab)
	var m float64 = math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - m)
	}
	last := r.Logprobs[len(r.Logprobs)-1]
	require.InDelta(t, float64(logits[last.Token])-m-math.Log(sum), float64(last.Logprob), 1e-4)
	require.Equal(t, sample.Argmax(logits), last.Top[0].Token, "the top alternative is the raw argmax")
}

func TestLogprobsOffByDefault(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()
	r, err := e.Generate(t.Context(), Request{Prompt: "Hello", MaxTokens: 3})
	require.NoError(t, err)
	require.Nil(t, r.Logprobs)
	require.Nil(t, r.Logits)

	// TopLogprobs alone implies Logprobs.
	r, err = e.Generate(t.Context(), Request{Prompt: "Hello", MaxTokens: 3, TopLogprobs: 1})
	require.NoError(t, err)
	require.Len(t, r.Logprobs, 3)
	require.Equal(t, r.Logprobs[0].Token, r.Logprobs[0].Top[0].Token, "greedy takes the top token")
	require.Equal(t, r.Logprobs[0].Logprob, r.Logprobs[0].Top[0].Logprob)
}

func TestTopLogprobsBounds(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()
	for _, n := range []int{-1, MaxTopLogprobs + 1} {
		_, err := e.Submit(t.Context(), Request{Prompt: "Hello", TopLogprobs: n})
		require.ErrorIs(t, err, ErrInvalidParams, "top logprobs %d", n)
	}
	require.Equal(t, uint64(2), e.Stats().Rejected[RejectInvalidParams])
}
