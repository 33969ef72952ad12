package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// storiesServer serves the built-in stories260K model (a real SentencePiece
// vocabulary of 512 tokens).
func storiesServer(t *testing.T, opts func(*Options)) *testServer {
	return start(t, setup{cfg: engine.Config{ModelPath: model.BuiltinStories, Device: "cpu", KVType: "f32"}, opts: opts})
}

func TestTokenize(t *testing.T) {
	ts := storiesServer(t, nil)
	tok := ts.eng.Tokenizer()
	encode := func(text string, opt tokenizer.Options) []int {
		ids, err := tok.Encode(text, opt)
		require.NoError(t, err)
		return ids
	}
	for _, c := range []struct {
		name string
		body string
		want []int
	}{
		{"plain", `{"content":"Once upon a time"}`, encode("Once upon a time", tokenizer.Options{Special: true})},
		{"add_special adds BOS", `{"content":"Once upon a time","add_special":true}`,
			append([]int{tok.BOS()}, encode("Once upon a time", tokenizer.Options{})...)},
		{"special text parsed by default", `{"content":"<s>"}`, []int{tok.BOS()}},
		{"parse_special false", `{"content":"<s>","parse_special":false}`, encode("<s>", tokenizer.Options{})},
		{"empty", `{"content":""}`, []int{}},
		{"no content", `{}`, []int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/tokenize", "", c.body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			var out struct{ Tokens []int }
			require.NoError(t, json.Unmarshal(raw, &out))
			require.Equal(t, c.want, out.Tokens)
		})
	}
	require.NotEqual(t, []int{tok.BOS()}, encode("<s>", tokenizer.Options{}), "the parse_special case must differ")

	// with_pieces: words keep their leading space (SentencePiece's dummy
	// prefix for the first, as llama.cpp shows it); a character split
	// over byte tokens shows each piece as its bytes (llama-server's
	// documented example on stories260K: "á" is [195] and [161]).
	resp, raw := ts.post(t, "/tokenize", "", `{"content":"Once upon á","with_pieces":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var out struct {
		Tokens []struct {
			ID    int             `json:"id"`
			Piece json.RawMessage `json:"piece"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	var pieces []string
	for _, p := range out.Tokens {
		pieces = append(pieces, string(p.Piece))
	}
	ids := encode("Once upon á", tokenizer.Options{Special: true})
	require.Len(t, out.Tokens, len(ids))
	require.Equal(t, ids[0], out.Tokens[0].ID)
	require.Equal(t, []string{`" Once"`, `" upon"`, `" "`, `[195]`, `[161]`}[len(pieces)-5:], pieces[len(pieces)-5:], "%s", raw)
}

func TestDetokenize(t *testing.T) {
	ts := storiesServer(t, nil)
	tok := ts.eng.Tokenizer()
	ids, err := tok.Encode("Once upon a time", tokenizer.Options{})
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		tokens []int
		want   string
	}{
		{"words", ids, "Once upon a time"},
		{"control tokens as text", append([]int{tok.BOS()}, ids...), tok.Piece(tok.BOS()) + "Once upon a time"},
		{"empty", []int{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/detokenize", "", map[string]any{"tokens": c.tokens})
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			var out struct{ Content string }
			require.NoError(t, json.Unmarshal(raw, &out))
			// llama.cpp keeps the dummy-prefix space of the first word.
			require.Equal(t, c.want, strings.Replace(out.Content, " Once", "Once", 1))
		})
	}
	for _, c := range []struct {
		name, body, param string
	}{
		{"out of vocabulary", `{"tokens":[1,512]}`, "tokens[1]"},
		{"negative", `{"tokens":[-1]}`, "tokens[0]"},
		{"not numbers", `{"tokens":["a"]}`, "tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/detokenize", "", c.body)
			e := requireAPIError(t, resp, raw, http.StatusBadRequest, "")
			require.NotNil(t, e.Error.Param, "%s", raw)
			require.Equal(t, c.param, *e.Error.Param)
		})
	}
}

func TestProps(t *testing.T) {
	ts := storiesServer(t, func(o *Options) { o.ModelPath = "/models/stories260K.gguf" })
	resp, raw := ts.get(t, "/props", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var p struct {
		Default struct {
			NCtx   int            `json:"n_ctx"`
			Params map[string]any `json:"params"`
		} `json:"default_generation_settings"`
		TotalSlots   int    `json:"total_slots"`
		ModelPath    string `json:"model_path"`
		ModelAlias   string `json:"model_alias"`
		ChatTemplate string `json:"chat_template"`
		BuildInfo    string `json:"build_info"`
		BOS          string `json:"bos_token"`
		EOS          string `json:"eos_token"`
	}
	require.NoError(t, json.Unmarshal(raw, &p))
	require.Equal(t, ts.eng.MaxContext(), p.Default.NCtx)
	require.EqualValues(t, DefaultCompletionMaxTokens, p.Default.Params["n_predict"])
	require.Equal(t, ts.eng.Config().MaxSeqs, p.TotalSlots)
	require.Equal(t, "/models/stories260K.gguf", p.ModelPath)
	require.Equal(t, "test-model", p.ModelAlias)
	require.Equal(t, ts.eng.ChatTemplateSource(""), p.ChatTemplate)
	require.Contains(t, p.ChatTemplate, "<|im_start|>", "the model has no template: ChatML")
	require.NotEmpty(t, p.BuildInfo)
	require.Equal(t, ts.eng.Tokenizer().Piece(ts.eng.Tokenizer().BOS()), p.BOS)
	require.Contains(t, p.BOS, "<s>")
	require.Contains(t, p.EOS, "</s>")

	resp, raw = ts.post(t, "/props", "", `{}`)
	requireAPIError(t, resp, raw, http.StatusMethodNotAllowed, "")
}

func TestLlamaEndpointsNeedAKey(t *testing.T) {
	ts := start(t, setup{echo: true, keys: "sk-alice-0123456789 alice\n"})
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/health", http.StatusOK}, // public, as llama-server's
		{http.MethodGet, "/v1/health", http.StatusOK},
		{http.MethodGet, "/props", http.StatusUnauthorized},
		{http.MethodPost, "/tokenize", http.StatusUnauthorized},
		{http.MethodPost, "/detokenize", http.StatusUnauthorized},
	} {
		t.Run(c.path, func(t *testing.T) {
			req, err := http.NewRequest(c.method, ts.url+c.path, strings.NewReader(`{}`))
			require.NoError(t, err)
			resp, err := ts.client.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode)
		})
	}
	resp, raw := ts.post(t, "/tokenize", "sk-alice-0123456789", `{"content":"ab"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.JSONEq(t, `{"tokens":[`+itoa(model.SyntheticByteOffset+'a')+`,`+itoa(model.SyntheticByteOffset+'b')+`]}`, string(raw))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A server built without an engine answers 503 "Loading model" in
// llama-server's shape on every endpoint until SetEngine.
func TestHealthWhileLoading(t *testing.T) {
	srv := New(Options{ModelID: "m"})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := hs.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	const loading = `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/health", ""},
		{http.MethodGet, "/healthz", ""},
		{http.MethodGet, "/v1/models", ""},
		{http.MethodPost, "/v1/completions", `{"prompt":"a"}`},
		{http.MethodPost, "/tokenize", `{"content":"a"}`},
		{http.MethodGet, "/metrics", ""},
	} {
		code, body := do(c.method, c.path, c.body)
		require.Equal(t, http.StatusServiceUnavailable, code, c.path)
		require.JSONEq(t, loading, body, c.path)
	}
	require.False(t, srv.Ready())

	eng, err := engine.New(engine.Config{KVPages: 16, MaxContext: 64})
	require.NoError(t, err)
	defer eng.Close()
	require.NoError(t, srv.SetEngine(eng))
	require.ErrorIs(t, srv.SetEngine(eng), ErrEngineSet)
	require.True(t, srv.Ready())
	code, body := do(http.MethodGet, "/health", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
	code, body = do(http.MethodPost, "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	require.Equal(t, http.StatusOK, code, body)
}

func TestModelIDAcceptance(t *testing.T) {
	for _, c := range []struct {
		name   string
		strict bool
		model  string
		status int
	}{
		{"any id by default", false, "gpt-3.5-turbo", http.StatusOK},
		{"own id", false, "test-model", http.StatusOK},
		{"strict refuses others", true, "gpt-3.5-turbo", http.StatusNotFound},
		{"strict own id", true, "test-model", http.StatusOK},
		{"strict no id", true, "", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := start(t, setup{echo: true, opts: func(o *Options) { o.StrictModelID = c.strict }})
			for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
				body := map[string]any{"model": c.model, "max_tokens": 2, "prompt": tokPrompt("ab"),
					"messages": []map[string]any{{"role": "user", "content": "x"}}}
				resp, raw := ts.post(t, path, "", body)
				require.Equal(t, c.status, resp.StatusCode, "%s: %s", path, raw)
				if c.status == http.StatusOK {
					var r struct{ Model string }
					require.NoError(t, json.Unmarshal(raw, &r))
					require.Equal(t, "test-model", r.Model, "the answer names the model served")
				}
			}
		})
	}
}

// batchChoices reads a non-streamed or streamed completions answer into
// its choices' texts and finish reasons by index.
func batchChoices(t *testing.T, raw []byte, stream bool) (texts, finishes map[int]string, u map[string]any) {
	t.Helper()
	texts, finishes = map[int]string{}, map[int]string{}
	var events []map[string]any
	if stream {
		var done bool
		events, done = sse(t, bytes.NewReader(raw))
		require.True(t, done, "the stream must end with [DONE]")
	} else {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(raw, &ev))
		events = []map[string]any{ev}
	}
	for _, ev := range events {
		if uu, ok := ev["usage"].(map[string]any); ok {
			u = uu
		}
		for _, c := range ev["choices"].([]any) {
			cm := c.(map[string]any)
			i := int(cm["index"].(float64))
			texts[i] += cm["text"].(string)
			if f, ok := cm["finish_reason"].(string); ok {
				require.Empty(t, finishes[i], "choice %d finished twice", i)
				finishes[i] = f
			}
		}
	}
	return texts, finishes, u
}

func TestBatchCompletionsEcho(t *testing.T) {
	ts := start(t, setup{echo: true})
	words := []string{"abc", "xy", "hello"}
	prompts := make([][]int, len(words))
	for i, w := range words {
		prompts[i] = tokPrompt(w)
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			body := map[string]any{"prompt": prompts, "max_tokens": 7, "stream": stream}
			if stream {
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			resp, raw := ts.post(t, "/v1/completions", "", body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			texts, finishes, u := batchChoices(t, raw, stream)
			require.Len(t, texts, len(words))
			promptTokens := 0
			for i, w := range words {
				require.Equal(t, echoed(w, 7), texts[i], "choice %d", i)
				require.Equal(t, "length", finishes[i], "choice %d", i)
				promptTokens += len(prompts[i])
			}
			require.NotNil(t, u)
			require.EqualValues(t, promptTokens, u["prompt_tokens"])
			require.EqualValues(t, 7*len(words), u["completion_tokens"])
			require.EqualValues(t, promptTokens+7*len(words), u["total_tokens"])
		})
	}
}

// A batch of text prompts answers each as the same prompt alone would.
func TestBatchCompletionsMatchSingle(t *testing.T) {
	ts := storiesServer(t, nil)
	prompts := []string{"Once upon a time", "The cat", "Lily liked"}
	resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": prompts, "max_tokens": 12, "temperature": 0})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var batch completionResponse
	require.NoError(t, json.Unmarshal(raw, &batch))
	require.Len(t, batch.Choices, len(prompts))
	for i, p := range prompts {
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": p, "max_tokens": 12, "temperature": 0})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var one completionResponse
		require.NoError(t, json.Unmarshal(raw, &one))
		require.Equal(t, i, batch.Choices[i].Index)
		require.Equal(t, one.Choices[0].Text, batch.Choices[i].Text, "prompt %d", i)
		require.NotEmpty(t, one.Choices[0].Text)
	}
}

func TestBatchCompletionsErrors(t *testing.T) {
	ts := start(t, setup{echo: true})
	many := make([]string, MaxBatchPrompts+1)
	for i := range many {
		many[i] = "a"
	}
	for _, c := range []struct {
		name   string
		prompt any
		status int
		code   string
		param  string
	}{
		{"empty array", []string{}, 400, "empty_prompt", "prompt"},
		{"empty member", []string{"a", ""}, 400, "empty_prompt", "prompt[1]"},
		{"empty token array member", [][]int{{5, 6}, {}}, 400, "empty_prompt", "prompt[1]"},
		{"too many", many, 400, "invalid_value", "prompt"},
		{"mixed types", []any{"a", 1}, 400, "invalid_type", "prompt"},
		{"token outside the vocabulary", [][]int{tokPrompt("a"), {99999}}, 400, "invalid_value", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": c.prompt, "max_tokens": 3})
			e := requireAPIError(t, resp, raw, c.status, c.code)
			if c.param != "" {
				require.NotNil(t, e.Error.Param, "%s", raw)
				require.Equal(t, c.param, *e.Error.Param)
			}
		})
	}
}

// A batch is all or none: one prompt refused at admission (here by the
// tenant quota) refuses the request, and the prompts already admitted are
// aborted (start's cleanup checks that no page stays held).
func TestBatchAllOrNone(t *testing.T) {
	ts := start(t, setup{echo: true, cfg: engine.Config{TenantQuota: 2}})
	prompts := [][]int{tokPrompt("a"), tokPrompt("b"), tokPrompt("c")}
	resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": prompts, "max_tokens": 3})
	requireAPIError(t, resp, raw, http.StatusTooManyRequests, "tenant_quota_exceeded")
	// Within the quota it is served.
	resp, raw = ts.post(t, "/v1/completions", "", map[string]any{"prompt": prompts[:2], "max_tokens": 3})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
}

// A forward pass that fails fails the whole batch with the generic
// internal error, streamed or not.
func TestBatchFailure(t *testing.T) {
	ts := start(t, setup{echo: true, fail: errors.New("device on fire")})
	for _, stream := range []bool{false, true} {
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": [][]int{tokPrompt("a"), tokPrompt("b")}, "max_tokens": 3, "stream": stream})
		e := requireAPIError(t, resp, raw, http.StatusInternalServerError, "internal_error")
		require.NotContains(t, e.Error.Message, "fire")
	}
}
