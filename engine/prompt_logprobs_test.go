package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// TestPromptLogprobs checks Request.PromptLogprobs against teacher forcing:
// the log-probability of prompt token i is the log-softmax of the logits
// after the prompt's first i tokens (a request of those tokens and one
// step, LastLogits), at every position, with top alternatives sorted.
// A prompt that is already in the prefix cache is computed again.
func TestPromptLogprobs(t *testing.T) {
	e, err := New(Config{PageSize: 4})
	require.NoError(t, err)
	defer e.Close()
	prompt := []int{model.SyntheticBOS}
	for _, b := range []byte("Hello there, kv!") {
		prompt = append(prompt, model.SyntheticByteOffset+int(b))
	}
	require.Greater(t, len(prompt), 9, "longer than two pages")

	// Warm the prefix cache with the same prompt.
	_, err = e.Generate(t.Context(), Request{Tokens: prompt, MaxTokens: 1})
	require.NoError(t, err)

	r, err := e.Generate(t.Context(), Request{Tokens: prompt, MaxTokens: 2, PromptLogprobs: true, TopLogprobs: 3})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens, "prompt logits cannot come from the prefix cache")
	require.Len(t, r.PromptLogprobs, len(prompt)-1)
	require.Len(t, r.Logprobs, 2, "TopLogprobs implies the generated tokens' too")
	for i := 1; i < len(prompt); i++ {
		ref, err := e.Generate(t.Context(), Request{Tokens: prompt[:i], MaxTokens: 1, LastLogits: true})
		require.NoError(t, err)
		lse := logSumExp(ref.Logits)
		got := r.PromptLogprobs[i-1]
		require.Equal(t, prompt[i], got.Token)
		require.InDelta(t, float64(ref.Logits[prompt[i]])-lse, float64(got.Logprob), 1e-4, "position %d", i)
		require.LessOrEqual(t, got.Logprob, float32(0))
		require.Len(t, got.Top, 3)
		require.Equal(t, sample.Argmax(ref.Logits), got.Top[0].Token, "position %d", i)
		for j := 1; j < len(got.Top); j++ {
			require.GreaterOrEqual(t, got.Top[j-1].Logprob, got.Top[j].Logprob)
		}
	}

	// The generated tokens are those of the same request without prompt
	// logprobs (greedy): the one-token chunks change no output.
	plain, err := e.Generate(t.Context(), Request{Tokens: prompt, MaxTokens: 2})
	require.NoError(t, err)
	require.Equal(t, plain.Tokens, r.Tokens)

	// Off by default; a one-token prompt has nothing to report.
	require.Nil(t, plain.PromptLogprobs)
	one, err := e.Generate(t.Context(), Request{Tokens: prompt[:1], MaxTokens: 1, PromptLogprobs: true})
	require.NoError(t, err)
	require.Empty(t, one.PromptLogprobs)
	require.NotNil(t, one.PromptLogprobs)
}

func TestLogitBiasOutsideVocab(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()
	v := e.ModelConfig().Vocab
	_, err = e.Submit(t.Context(), Request{Prompt: "Hi", Sampling: sample.Params{LogitBias: map[int]float32{v: 1}}})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, "logit_bias")
	_, err = e.Submit(t.Context(), Request{Prompt: "Hi", Sampling: sample.Params{PresencePenalty: 3}})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, "presence_penalty")

	// +100 forces a token at a high temperature, -100 bans the greedy one.
	forced := model.SyntheticByteOffset + int('x')
	r, err := e.Generate(t.Context(), Request{Prompt: "Hi", MaxTokens: 8,
		Sampling: sample.Params{Temperature: 1.5, Seed: 7, HasSeed: true, LogitBias: map[int]float32{forced: 100}}})
	require.NoError(t, err)
	for _, tok := range r.Tokens {
		require.Equal(t, forced, tok)
	}
	g, err := e.Generate(t.Context(), Request{Prompt: "Hi", MaxTokens: 1})
	require.NoError(t, err)
	b, err := e.Generate(t.Context(), Request{Prompt: "Hi", MaxTokens: 1, Sampling: sample.Params{LogitBias: map[int]float32{g.Tokens[0]: -100}}})
	require.NoError(t, err)
	require.NotEqual(t, g.Tokens[0], b.Tokens[0])
}

func TestPromptLogprobsOnFirstEvent(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()
	st, err := e.Submit(t.Context(), Request{Prompt: "Hi there", MaxTokens: 3, PromptLogprobs: true})
	require.NoError(t, err)
	require.Equal(t, model.SyntheticBOS, st.PromptTokens()[0])
	var events []Event
	for ev := range st.Events() {
		events = append(events, ev)
	}
	r := st.Wait()
	require.Len(t, r.PromptLogprobs, len(st.PromptTokens())-1)
	require.Equal(t, r.PromptLogprobs, events[0].PromptLogprobs)
	for _, ev := range events[1:] {
		require.Nil(t, ev.PromptLogprobs)
	}
	require.Nil(t, r.Logprobs, "prompt logprobs alone do not record the generated tokens'")
}
