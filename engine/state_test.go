package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

func openEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestStateRoundTripAndModelSeal(t *testing.T) {
	a := openEngine(t, Config{ModelPath: model.BuiltinSynthetic})
	b := openEngine(t, Config{ModelPath: model.BuiltinSynthetic}) // the same model, another engine
	stories := openEngine(t, Config{ModelPath: model.BuiltinStories})
	require.Equal(t, a.Fingerprint(), b.Fingerprint())
	require.NotEqual(t, a.Fingerprint(), stories.Fingerprint())

	tokens := []int{1, 200, 3, 4, 255}
	st, err := a.SaveState(tokens)
	require.NoError(t, err)
	require.Len(t, st, StateSize(len(tokens)))
	got, err := b.LoadState(st)
	require.NoError(t, err)
	require.Equal(t, tokens, got)

	_, err = stories.LoadState(st)
	require.ErrorIs(t, err, ErrStateModel)
	require.Contains(t, err.Error(), "another model")
}

func TestStateRejectsDamage(t *testing.T) {
	e := openEngine(t, Config{})
	st, err := e.SaveState([]int{5, 6, 7})
	require.NoError(t, err)
	flip := func(i int) []byte {
		c := slices.Clone(st)
		c[i] ^= 1
		return c
	}
	for name, b := range map[string][]byte{
		"empty":       nil,
		"magic":       flip(0),
		"version":     flip(8),
		"count":       flip(12),
		"token":       flip(stateHeader),
		"mac":         flip(len(st) - 1),
		"truncated":   st[:len(st)-1],
		"extended":    append(slices.Clone(st), 0),
		"header only": st[:stateHeader],
		"garbage":     []byte("this is not a state, not at all, no"),
	} {
		_, err := e.LoadState(b)
		require.ErrorIs(t, err, ErrStateInvalid, name)
	}
	// A damaged fingerprint reads as another model: never loaded either.
	_, err = e.LoadState(flip(16))
	require.ErrorIs(t, err, ErrStateModel)

	_, err = e.SaveState(nil)
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.SaveState([]int{1, e.ModelConfig().Vocab})
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.SaveState([]int{-1})
	require.ErrorIs(t, err, ErrInvalidParams)
}

// A sequence continued from its saved state reuses its KV from the
// tenant's prefix cache, and gives what the uninterrupted sequence gives.
func TestStateContinuesThroughThePrefixCache(t *testing.T) {
	e := openEngine(t, Config{PageSize: 4})
	r, err := e.Generate(t.Context(), Request{Prompt: "Once upon a time there was", MaxTokens: 12, Tenant: "t"})
	require.NoError(t, err)
	ctx := append(slices.Clone(r.PromptTokens), r.Tokens...)
	st, err := e.SaveState(ctx)
	require.NoError(t, err)

	tokens, err := e.LoadState(st)
	require.NoError(t, err)
	cont, err := e.Generate(t.Context(), Request{Tokens: tokens, MaxTokens: 4, Tenant: "t"})
	require.NoError(t, err)
	require.Positive(t, cont.CachedTokens)
	require.LessOrEqual(t, cont.CachedTokens, len(ctx)-1)

	// Another tenant gets the same tokens, and none of the KV.
	other, err := e.Generate(t.Context(), Request{Tokens: tokens, MaxTokens: 4, Tenant: "u"})
	require.NoError(t, err)
	require.Zero(t, other.CachedTokens)
	require.Equal(t, cont.Tokens, other.Tokens)
}

func TestMetadataGGUF(t *testing.T) {
	e := openEngine(t, Config{ModelPath: testmodels.Path(t, "stories260K.gguf")})
	meta := e.Metadata()
	require.NotEmpty(t, meta)
	require.True(t, slices.IsSortedFunc(meta, func(a, b MetaKV) int {
		if a.Key < b.Key {
			return -1
		}
		return 1
	}))
	v, ok := e.MetadataValue("general.architecture")
	require.True(t, ok)
	require.Equal(t, "llama", v)
	_, ok = e.MetadataValue("tokenizer.ggml.tokens")
	require.False(t, ok, "arrays are left out, as llama.cpp leaves them out")
	v, ok = e.MetadataValue("llama.embedding_length")
	require.True(t, ok)
	require.Equal(t, "64", v)

	// The same file opened again has the same fingerprint; the llama2.c
	// checkpoint of the same weights is not the same model file.
	e2 := openEngine(t, Config{ModelPath: testmodels.Path(t, "stories260K.gguf")})
	require.Equal(t, e.Fingerprint(), e2.Fingerprint())
}

func TestMetadataWithoutGGUF(t *testing.T) {
	e := openEngine(t, Config{ModelPath: model.BuiltinStories})
	v, ok := e.MetadataValue("general.architecture")
	require.True(t, ok)
	require.Equal(t, "llama", v)
	v, ok = e.MetadataValue("llama.embedding_length")
	require.True(t, ok)
	require.Equal(t, "64", v)
	_, ok = e.MetadataValue("no.such.key")
	require.False(t, ok)
}

// A sequence saved after one request and continued by another.
func ExampleEngine_SaveState() {
	e, err := New(Config{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, _ := e.Generate(ctx, Request{Prompt: "Hello", MaxTokens: 4})
	state, _ := e.SaveState(append(slices.Clone(r.PromptTokens), r.Tokens...)) // bytes to keep anywhere

	tokens, err := e.LoadState(state) // ErrStateModel for another model's state
	if err != nil {
		panic(err)
	}
	cont, _ := e.Generate(ctx, Request{Tokens: tokens, MaxTokens: 4})
	fmt.Println(len(tokens), "tokens restored,", len(cont.Tokens), "more generated")
	// Output: 10 tokens restored, 4 more generated
}
