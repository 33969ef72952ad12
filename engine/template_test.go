package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// llama3Engine is an engine over synthetic weights with the Llama 3
// vocabulary of the golden llama32.gguf (<|begin_of_text|> BOS, add_bos
// true, <|eot_id|> an end-of-generation control token).
func llama3Engine(t *testing.T, chatTemplate string) (*Engine, tokenizer.Tokenizer) {
	t.Helper()
	f, err := gguf.Open(testmodels.Golden(t, "arch/llama32.gguf"))
	require.NoError(t, err)
	tok, err := tokenizer.FromMetadata(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cfg := model.DefaultConfig()
	cfg.Vocab = tok.VocabSize()
	w, err := model.Synthetic(cfg, model.BuiltinSeed, ml.F32)
	require.NoError(t, err)
	e, err := New(Config{Weights: w, Tokenizer: tok, KVPages: 16, ChatTemplate: chatTemplate})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e, tok
}

const llama3Template = `{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`

// TestPromptBOSAndSpecialTokens: BOS is added once, whether or not the text
// already starts with it, and special-token text becomes a token only when
// asked.
func TestPromptBOSAndSpecialTokens(t *testing.T) {
	e, tok := llama3Engine(t, llama3Template)
	bos := tok.BOS()
	eot, ok := tok.Lookup("<|eot_id|>")
	require.True(t, ok)
	require.True(t, tok.AddBOS())
	require.Contains(t, e.eos, eot, "generation stops at <|eot_id|>")
	for _, id := range tok.EOG() {
		require.Contains(t, e.eos, id)
	}

	cases := []struct {
		name         string
		text         string
		bos, special bool
		wantFirst    []int
		wantSpecial  bool // <|eot_id|> is one token, the last
	}{
		{"plain text gets BOS", "hi", true, false, []int{bos}, false},
		{"no BOS asked", "hi", false, false, nil, false},
		{"special text stays text", "hi<|eot_id|>", true, false, []int{bos}, false},
		{"special text parsed", "hi<|eot_id|>", true, true, []int{bos}, true},
		{"BOS in the text is not doubled", "<|begin_of_text|>hi<|eot_id|>", true, true, []int{bos}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids, err := e.encodePrompt(c.text, c.bos, c.special)
			require.NoError(t, err)
			if c.wantFirst != nil {
				require.Equal(t, c.wantFirst, ids[:1])
				require.NotEqual(t, bos, ids[1], "one BOS")
			} else {
				require.NotEqual(t, bos, ids[0])
			}
			if c.wantSpecial {
				require.Equal(t, eot, ids[len(ids)-1])
				require.NotContains(t, ids[:len(ids)-1], eot)
			} else {
				require.NotContains(t, ids, eot)
			}
		})
	}
}

// TestChatTokens: the render of a conversation, tokenized with its special
// tokens and a single BOS.
func TestChatTokens(t *testing.T) {
	e, tok := llama3Engine(t, llama3Template)
	msgs := []chat.Message{{Role: "user", Content: "Hello"}}
	text, err := e.ApplyChatTemplate(msgs, ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Equal(t, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", text)
	ids, err := e.ChatTokens(msgs, ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Equal(t, tok.BOS(), ids[0])
	require.NotEqual(t, tok.BOS(), ids[1])
	var pieces []string
	for _, id := range ids {
		pieces = append(pieces, tok.Piece(id))
	}
	require.Contains(t, pieces, "<|start_header_id|>")
	require.Contains(t, pieces, "<|eot_id|>")
	require.False(t, e.ChatTemplateFallback())

	_, err = e.ApplyChatTemplate(msgs, ChatOptions{Template: "tool_use"})
	require.ErrorIs(t, err, chat.ErrNoTemplate)
}

// TestChatTemplateFallbackAndBrokenFileTemplate: no template in the file
// means ChatML; a file template that does not parse leaves completions
// working and makes chat calls fail with the parse error.
func TestChatTemplateFallbackAndBrokenFileTemplate(t *testing.T) {
	e, err := New(Config{KVPages: 16})
	require.NoError(t, err)
	defer e.Close()
	require.True(t, e.ChatTemplateFallback())
	text, err := e.ApplyChatTemplate([]chat.Message{{Role: "user", Content: "x"}}, ChatOptions{})
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>user\nx<|im_end|>\n", text)

	w, err := model.Synthetic(model.DefaultConfig(), model.BuiltinSeed, ml.F32)
	require.NoError(t, err)
	w.ChatTemplates = map[string]string{"": "{% for %}"}
	e2, err := New(Config{Weights: w, Tokenizer: tokenizer.NewBytes(), KVPages: 16})
	require.NoError(t, err)
	defer e2.Close()
	_, err = e2.ApplyChatTemplate([]chat.Message{{Role: "user", Content: "x"}}, ChatOptions{})
	require.ErrorIs(t, err, chat.ErrSyntax)
	res, err := e2.Generate(t.Context(), Request{Prompt: "hi", MaxTokens: 2})
	require.NoError(t, err)
	require.Len(t, res.Tokens, 2)
}
