package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/audit"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testenv"
)

// sharedFile is a file of ../shared (beside the model directory), skipped
// when absent (failed under CI).
func sharedFile(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{testenv.ModelDir(t), ".."}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found: %v", p, err)
		}
		t.Skipf("%s not found", p)
	}
	return p
}

// chatServer serves an engine whose runner is the audit echo model: it
// replies with the prompt's tokens from position 1 (after BOS) up to the
// first sep token, over and over. A chat reply therefore runs into the
// end-of-turn token the template put after the first turn, which is where
// generation must stop.
func chatServer(t *testing.T, cfg engine.Config, sep, vocab int) *httptest.Server {
	t.Helper()
	cfg.KVPages, cfg.MaxContext = 64, 512
	cfg.KVType = "f32" // the echo model keeps token IDs in the KV cache
	var echo *audit.Echo
	hooks := engine.TestHooks{NewRunner: func(pool *kvcache.Pool) (engine.Runner, error) {
		var err error
		echo, err = audit.NewEcho(pool, sep, "")
		return echo, err
	}}
	eng, err := engine.New(cfg, engine.WithTestHooks(hooks))
	require.NoError(t, err)
	echo.SetVocab(vocab)
	ts := httptest.NewServer(New(Options{Engine: eng}))
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, eng.Close())
	})
	return ts
}

func postJSON(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out.Bytes()
}

// The echo model answers a prompt by a fixed rule: the k-th generated token
// is prompt[1 + (k0+k) mod (P-1)], where P is the first position of its
// separator token and k0 the number of prompt tokens after it. simulateEcho
// applies the rule up to the first end-of-generation token: the text the
// reply must have, its token count, and how many control tokens it passed
// (they must decode to nothing).
func simulateEcho(prompt []int, sep int, tok tokenizer.Tokenizer) (text string, n, controls int, ok bool) {
	p := slices.Index(prompt, sep)
	if p < 2 {
		return "", 0, 0, false
	}
	k0 := len(prompt) - p - 1
	var b []byte
	prev := -1
	for k := 0; k < 2*len(prompt); k++ {
		id := prompt[1+(k0+k)%(p-1)]
		if tok.IsEOG(id) {
			return string(b), k, controls, true
		}
		if isControl(tok.Piece(id)) {
			controls++
		}
		b = append(b, tok.Decode(prev, id)...)
		prev = id
	}
	return "", 0, 0, false
}

// isControl: the control-token spellings of the test vocabularies.
func isControl(piece string) bool {
	return strings.HasPrefix(piece, "<|") || piece == "<s>" || piece == "</s>"
}

// pickSep chooses the echo separator among the prompt's second-half tokens
// (first occurrences, not special) so that the reply has text and passes at
// least one control token before the end of the turn.
func pickSep(t *testing.T, prompt []int, tok tokenizer.Tokenizer) int {
	t.Helper()
	for i := len(prompt) / 2; i < len(prompt); i++ {
		id := prompt[i]
		if slices.Contains(prompt[:i], id) || isControl(tok.Piece(id)) {
			continue
		}
		if text, _, controls, ok := simulateEcho(prompt, id, tok); ok && text != "" && controls > 0 {
			return id
		}
	}
	t.Fatal("no separator gives a reply through a control token")
	return -1
}

// echoReply is simulateEcho for the chosen separator, logged.
func echoReply(t *testing.T, prompt []int, sep int, tok tokenizer.Tokenizer) (string, int) {
	t.Helper()
	text, n, controls, ok := simulateEcho(prompt, sep, tok)
	require.True(t, ok, "the echo model never reaches an end-of-generation token")
	require.Positive(t, controls)
	t.Logf("echo reply: %d tokens, %d silent control tokens: %q", n, controls, text)
	return text, n
}

// vocabConfig is an engine over synthetic weights sized for the vocabulary
// of a GGUF file (the golden files' weights need architectures and RoPE
// variants the engine may not load; the test is about the vocabulary).
func vocabConfig(t *testing.T, path string) (engine.Config, tokenizer.Tokenizer, map[string]string) {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	tok, err := tokenizer.FromMetadata(f)
	require.NoError(t, err)
	templates := model.ChatTemplates(f)
	require.NoError(t, f.Close())
	cfg := model.DefaultConfig()
	cfg.Vocab = tok.VocabSize()
	w, err := model.Synthetic(cfg, model.BuiltinSeed, ml.F32)
	require.NoError(t, err)
	w.ChatTemplates = templates
	return engine.Config{Weights: w, Tokenizer: tok}, tok, templates
}

// TestChatStopsAtEndOfTurn is the end-to-end chat test: a Llama 3 vocabulary
// (llama32.gguf: <|eot_id|> is an end-of-generation control token), the
// Llama 3.1 chat template given as the override (what serve
// --chat-template-file sets), and a model that would talk on past its turn.
// The reply must end at <|eot_id|> with finish_reason "stop", and no
// control token may show in the text.
func TestChatStopsAtEndOfTurn(t *testing.T) {
	path := testenv.Model(t, "../golden/arch/llama32.gguf")
	src, err := os.ReadFile(sharedFile(t, "templates", "meta-llama-Llama-3.1-8B-Instruct.jinja"))
	require.NoError(t, err)
	cfg, tok, _ := vocabConfig(t, path)
	cfg.ChatTemplate = string(src)
	eot, ok := tok.Lookup("<|eot_id|>")
	require.True(t, ok)
	require.True(t, tok.IsEOG(eot))

	msgs := []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "Say zebra"},
	}
	tmpl, err := chat.Parse(string(src))
	require.NoError(t, err)
	text, err := tmpl.Render(chat.Input{
		Messages:            []chat.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say zebra"}},
		AddGenerationPrompt: true, BOSToken: tok.Piece(tok.BOS()), EOSToken: tok.Piece(tok.EOS()),
	})
	require.NoError(t, err)
	prompt, err := tok.Encode(text, tokenizer.Options{Special: true})
	require.NoError(t, err)
	require.Equal(t, tok.BOS(), prompt[0], "the render starts with <|begin_of_text|>")
	sep := pickSep(t, prompt, tok)

	ts := chatServer(t, cfg, sep, tok.VocabSize())

	// /apply-template shows the render.
	code, raw := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": msgs})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var applied struct{ Prompt string }
	require.NoError(t, json.Unmarshal(raw, &applied))
	require.Equal(t, text, applied.Prompt)

	code, raw = postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 300})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var resp chatResponse
	require.NoError(t, json.Unmarshal(raw, &resp))
	reply := *resp.Choices[0].Message.Content
	require.Equal(t, "stop", *resp.Choices[0].FinishReason, "reply %q", reply)

	// The prompt was tokenized with special tokens and one BOS (the echo
	// model's reply depends on every prompt token), and the reply ends at
	// <|eot_id|> with the control tokens silent.
	want, n := echoReply(t, prompt, sep, tok)
	require.Equal(t, want, reply)
	require.Equal(t, n, resp.Usage.CompletionTokens)
	require.NotContains(t, reply, "<|")
	require.Equal(t, len(prompt), resp.Usage.PromptTokens, "special tokens parsed, one BOS")

	// Streaming ends the same way.
	code, raw = postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 300, "stream": true})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	events, done := sse(t, bytes.NewReader(raw))
	require.True(t, done)
	streamed, finish := streamText(t, events, true)
	require.Equal(t, "stop", finish)
	require.Equal(t, want, streamed)
}

// TestChatTemplateFromFile: a template stored in the GGUF (phi3.gguf's,
// which ends turns with <|end|>) is used without any override, and a
// template that raises gives a 400 with its message.
func TestChatTemplateFromFile(t *testing.T) {
	path := testenv.Model(t, "../golden/arch/phi3.gguf")
	cfg, tok, templates := vocabConfig(t, path)
	require.Contains(t, templates, "")
	end, ok := tok.Lookup("<|end|>")
	require.True(t, ok)
	require.True(t, tok.IsEOG(end))

	tmpl, err := chat.Parse(templates[""])
	require.NoError(t, err)
	msgs := []map[string]any{{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Say zebra"}}
	text, err := tmpl.Render(chat.Input{
		Messages:            []chat.Message{{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi"}, {Role: "user", Content: "Say zebra"}},
		AddGenerationPrompt: true, BOSToken: tok.Piece(tok.BOS()), EOSToken: tok.Piece(tok.EOS()),
	})
	require.NoError(t, err)
	prompt, err := tok.Encode(text, tokenizer.Options{Special: true})
	require.NoError(t, err)
	sep := pickSep(t, prompt, tok)
	ts := chatServer(t, cfg, sep, tok.VocabSize())

	code, raw := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": msgs})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.Contains(t, string(raw), `<|user|>`)

	code, raw = postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 200})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var resp chatResponse
	require.NoError(t, json.Unmarshal(raw, &resp))
	require.Equal(t, "stop", *resp.Choices[0].FinishReason)
	reply := *resp.Choices[0].Message.Content
	want, n := echoReply(t, prompt, sep, tok)
	require.Equal(t, want, reply)
	require.Equal(t, n, resp.Usage.CompletionTokens)
	require.NotContains(t, reply, "<|")
}

// TestTemplateErrors: a template that raises is the client's 400 with the
// template's message; a template given to the engine that does not parse is
// refused when the engine is built.
func TestTemplateErrors(t *testing.T) {
	const gemmaLike = `{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}` +
		`{% for m in messages %}<start_of_turn>{{ m['role'] }}
{{ m['content'] }}<end_of_turn>
{% endfor %}`
	ts := chatServer(t, engine.Config{ChatTemplate: gemmaLike}, sep, model.SyntheticVocab)
	for _, ep := range []string{"/v1/chat/completions", "/apply-template"} {
		code, raw := postJSON(t, ts.URL+ep, map[string]any{"messages": []map[string]any{{"role": "system", "content": "x"}, {"role": "user", "content": "y"}}})
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", ep, raw)
		require.Contains(t, string(raw), "System role not supported")
		require.Contains(t, string(raw), "chat_template_error")
	}
	code, raw := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": []map[string]any{{"role": "user", "content": "y"}}})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.JSONEq(t, `{"prompt": "<start_of_turn>user\ny<end_of_turn>\n"}`, string(raw))

	_, err := engine.New(engine.Config{ChatTemplate: "{% for %}"})
	require.ErrorIs(t, err, chat.ErrSyntax)
	require.ErrorIs(t, err, engine.ErrInvalidParams)
}

// TestCompletionsParseSpecial: special-token text in a completion prompt
// stays text unless the request sets parse_special.
func TestCompletionsParseSpecial(t *testing.T) {
	cfg, tok, _ := vocabConfig(t, testenv.Model(t, "../golden/arch/llama32.gguf"))
	ts := chatServer(t, cfg, 0, tok.VocabSize())
	count := func(special bool) int {
		code, raw := postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": "<|eot_id|>", "max_tokens": 1, "parse_special": special})
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var resp completionResponse
		require.NoError(t, json.Unmarshal(raw, &resp))
		return resp.Usage.PromptTokens
	}
	require.Equal(t, 2, count(true), "BOS + <|eot_id|>")
	require.Greater(t, count(false), 2, "the text spelled out in ordinary tokens")
}

// TestApplyTemplateTools: /apply-template hands tools and tool calls to the
// template with their keys in the request's order (tojson shows it, as
// transformers does); a call's arguments string becomes the object
// templates expect (engine/toolcall.AdaptHistory).
func TestApplyTemplateTools(t *testing.T) {
	const tmpl = `{{ tools|tojson }}{% for m in messages %}|{{ m.role }}:{% if m.tool_calls %}{{ m.content is none }}{{ m.tool_calls[0].function|tojson }}{% else %}{{ m.content }}{% endif %}{% endfor %}`
	ts := chatServer(t, engine.Config{ChatTemplate: tmpl}, sep, model.SyntheticVocab)
	body := `{"tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object","required":["q"]}}}],` +
		`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"q\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"42"}]}`
	resp, err := http.Post(ts.URL+"/apply-template", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Prompt string }
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, `[{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "required": ["q"]}}}]`+
		`|user:hi|assistant:True{"name": "get", "arguments": {"q": 1}}|tool:42`, out.Prompt)
}
