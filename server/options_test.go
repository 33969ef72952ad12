package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// TestSamplingExtensions: the vLLM and llama-server sampling names reach
// the engine's sampling parameters; bad values are 400s naming the field.
func TestSamplingExtensions(t *testing.T) {
	base := sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1}
	with := func(f func(*sample.Params)) sample.Params { p := base; f(&p); return p }
	cases := []struct {
		name string
		body string
		want sample.Params
	}{
		{"defaults", `{}`, base},
		{"top_k", `{"top_k": 40}`, with(func(p *sample.Params) { p.TopK = 40 })},
		{"top_k -1 is off (vLLM)", `{"top_k": -1}`, base},
		{"min_p", `{"min_p": 0.05}`, with(func(p *sample.Params) { p.MinP = 0.05 })},
		{"repetition_penalty: whole context (vLLM)", `{"repetition_penalty": 1.2}`,
			with(func(p *sample.Params) { p.RepeatPenalty = 1.2; p.RepeatLastN = -1 })},
		{"repeat_penalty: last 64 (llama.cpp)", `{"repeat_penalty": 1.1}`,
			with(func(p *sample.Params) { p.RepeatPenalty = 1.1; p.RepeatLastN = DefaultRepeatLastN })},
		{"repeat_last_n overrides", `{"repeat_penalty": 1.1, "repeat_last_n": 16}`,
			with(func(p *sample.Params) { p.RepeatPenalty = 1.1; p.RepeatLastN = 16 })},
		{"both penalties agreeing", `{"repeat_penalty": 1.3, "repetition_penalty": 1.3}`,
			with(func(p *sample.Params) { p.RepeatPenalty = 1.3; p.RepeatLastN = DefaultRepeatLastN })},
		{"integral floats", `{"top_k": 5.0, "seed": 7.0, "max_tokens": 1e1}`,
			with(func(p *sample.Params) { p.TopK = 5; p.Seed, p.HasSeed = 7, true })},
		{"seed 0 is a seed", `{"seed": 0}`, with(func(p *sample.Params) { p.HasSeed = true })},
		{"temperature, top_p", `{"temperature": 0, "top_p": 0.5}`,
			with(func(p *sample.Params) { p.Temperature = 0; p.TopP = 0.5 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s sampling
			require.NoError(t, json.Unmarshal([]byte(c.body), &s))
			p, e := s.validate(16)
			require.Nil(t, e)
			require.Equal(t, c.want, samplingParams(p))
		})
	}
	var s sampling
	require.NoError(t, json.Unmarshal([]byte(`{"max_tokens": 1e1}`), &s))
	p, e := s.validate(16)
	require.Nil(t, e)
	require.Equal(t, 10, p.maxTokens)
}

func TestRequestOptionErrors(t *testing.T) {
	ts := start(t, setup{echo: true})
	chat := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body, code, param string
	}{
		{"min_p range", "/v1/completions", `{"prompt":"a","min_p":1.5}`, "invalid_value", "min_p"},
		{"repeat_penalty zero", "/v1/completions", `{"prompt":"a","repeat_penalty":0}`, "invalid_value", "repeat_penalty"},
		{"repetition_penalty negative", "/v1/chat/completions", `{` + chat + `,"repetition_penalty":-1}`, "invalid_value", "repetition_penalty"},
		{"penalties disagree", "/v1/completions", `{"prompt":"a","repeat_penalty":1.1,"repetition_penalty":1.2}`, "invalid_value", "repeat_penalty"},
		{"repeat_last_n", "/v1/completions", `{"prompt":"a","repeat_penalty":1.1,"repeat_last_n":-2}`, "invalid_value", "repeat_last_n"},
		{"top_k", "/v1/completions", `{"prompt":"a","top_k":-2}`, "invalid_value", "top_k"},
		{"max_tokens fractional", "/v1/completions", `{"prompt":"a","max_tokens":10.5}`, "invalid_type", "max_tokens"},
		{"max_tokens huge", "/v1/completions", `{"prompt":"a","max_tokens":1e12}`, "invalid_value", "max_tokens"},
		{"seed fractional", "/v1/chat/completions", `{` + chat + `,"seed":1.5}`, "invalid_type", "seed"},
		{"n string", "/v1/completions", `{"prompt":"a","n":"2"}`, "invalid_type", "n"},
		{"functions", "/v1/chat/completions", `{` + chat + `,"functions":[{"name":"f"}]}`, "unsupported_value", "functions"},
		{"function_call", "/v1/chat/completions", `{` + chat + `,"function_call":{"name":"f"}}`, "unsupported_value", "function_call"},
		{"tools on chat", "/v1/chat/completions", `{` + chat + `,"tools":[{"type":"function"}]}`, "unsupported_value", "tools"},
		{"tools on completions", "/v1/completions", `{"prompt":"a","tools":[{"type":"function"}]}`, "unsupported_value", "tools"},
		{"tool_choice required", "/v1/chat/completions", `{` + chat + `,"tool_choice":"required"}`, "unsupported_value", "tool_choice"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + chat + `,"top_logprobs":3}`, "invalid_value", "top_logprobs"},
		{"top_logprobs on completions", "/v1/completions", `{"prompt":"a","top_logprobs":2}`, "invalid_value", "top_logprobs"},
		{"response_format unknown type on chat", "/v1/chat/completions", `{` + chat + `,"response_format":{"type":"yaml"}}`, "unsupported_value", "response_format.type"},
		{"response_format json_schema without schema", "/v1/completions", `{"prompt":"a","response_format":{"type":"json_schema"}}`, "invalid_value", "response_format.json_schema"},
		{"response_format not an object", "/v1/completions", `{"prompt":"a","response_format":"json"}`, "invalid_type", "response_format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, c.path, "", c.body)
			e := requireAPIError(t, resp, raw, http.StatusBadRequest, c.code)
			require.NotNil(t, e.Error.Param, "%s", raw)
			require.Equal(t, c.param, *e.Error.Param)
		})
	}
	// Set to "off", the same fields are fine.
	for _, body := range []string{
		`{"prompt":[1,104,105,258],"max_tokens":2.0,"tools":[],"tool_choice":"none","functions":null,"top_logprobs":0,"response_format":{"type":"text"},"min_p":0.1,"repeat_penalty":1.0,"top_k":3.0}`,
	} {
		resp, raw := ts.post(t, "/v1/completions", "", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var out completionResponse
		require.NoError(t, json.Unmarshal(raw, &out))
		require.Equal(t, 2, out.Usage.CompletionTokens)
	}
}

// TestBodyWithoutJSONContentType: as llama-server, a JSON body is read
// without a Content-Type, and with the form type `curl -d` sends.
func TestBodyWithoutJSONContentType(t *testing.T) {
	ts := start(t, setup{echo: true})
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "text/plain"} {
		req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/completions", strings.NewReader(`{"prompt":[1,104,105,258],"max_tokens":2}`))
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		} else {
			req.Header.Del("Content-Type")
		}
		resp, err := ts.client.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct == "text/plain" {
			requireAPIError(t, resp, raw, http.StatusUnsupportedMediaType, "")
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "Content-Type %q: %s", ct, raw)
	}
}

func TestAuthSchemeCaseInsensitive(t *testing.T) {
	ts := start(t, setup{echo: true, keys: "secret-aaaa alice\n"})
	for _, c := range []struct {
		header string
		status int
	}{
		{"Bearer secret-aaaa", 200}, {"bearer secret-aaaa", 200}, {"BEARER secret-aaaa", 200},
		{"Basic secret-aaaa", 401}, {"Bearer", 401}, {"secret-aaaa", 401}, {"bearer wrong-key", 401},
	} {
		req, err := http.NewRequest(http.MethodGet, ts.url+"/v1/models", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", c.header)
		resp, err := ts.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, c.header)
	}
}

func TestSystemFingerprint(t *testing.T) {
	ts := start(t, setup{echo: true})
	fps := map[string]bool{}
	resp, raw := ts.post(t, "/v1/completions", "", `{"prompt":[1,104,105,258],"max_tokens":2}`)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	var c completionResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	fps[c.SystemFingerprint] = true
	resp, raw = ts.post(t, "/v1/chat/completions", "", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	var ch chatResponse
	require.NoError(t, json.Unmarshal(raw, &ch))
	fps[ch.SystemFingerprint] = true
	resp, raw = ts.post(t, "/v1/chat/completions", "", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	events, done := sse(t, strings.NewReader(string(raw)))
	require.True(t, done)
	for _, ev := range events {
		fps[ev["system_fingerprint"].(string)] = true
	}
	require.Len(t, fps, 1, "one fingerprint for one server: %v", fps)
	for fp := range fps {
		require.Regexp(t, `^fp_[0-9a-f]{10}$`, fp)
	}
	// Another model shape gives another fingerprint.
	other, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", KVPages: 16})
	require.NoError(t, err)
	defer other.Close()
	require.NotEqual(t, fingerprint(other), c.SystemFingerprint)
	require.Equal(t, c.SystemFingerprint, fingerprint(ts.eng))
}

func TestCORS(t *testing.T) {
	eng, err := engine.New(engine.Config{KVPages: 16, MaxContext: 64})
	require.NoError(t, err)
	defer eng.Close()
	keys, err := ParseKeys(strings.NewReader("secret-aaaa alice\n"), "keys")
	require.NoError(t, err)
	for _, origins := range [][]string{nil, {"https://app.example"}, {"*"}} {
		srv := httptest.NewServer(New(Options{Engine: eng, Keys: keys, CORSOrigins: origins}))
		do := func(method, origin string, hdr map[string]string) *http.Response {
			req, err := http.NewRequest(method, srv.URL+"/v1/models", nil)
			require.NoError(t, err)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		}
		preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
		resp := do(http.MethodOptions, "https://app.example", preflight)
		switch {
		case origins == nil:
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
			require.NotEqual(t, http.StatusNoContent, resp.StatusCode)
		default:
			// A preflight carries no credentials and gets no 401.
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			require.Equal(t, origins[0], resp.Header.Get("Access-Control-Allow-Origin"))
			require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
			require.Equal(t, "authorization, content-type", resp.Header.Get("Access-Control-Allow-Headers"))
		}
		// The real request: authenticated as usual, with the header.
		resp = do(http.MethodGet, "https://app.example", map[string]string{"Authorization": "Bearer secret-aaaa"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if origins != nil {
			require.NotEmpty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		resp = do(http.MethodGet, "https://app.example", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		// An origin not listed gets no CORS headers.
		resp = do(http.MethodOptions, "https://evil.example", preflight)
		if origins == nil || origins[0] != "*" {
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		} else {
			require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
		}
		srv.Close()
	}
}

// TestMountInApplicationMux: an application serves the API under its own
// prefix next to its own routes.
func TestMountInApplicationMux(t *testing.T) {
	eng, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", KVPages: 64})
	require.NoError(t, err)
	defer eng.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello from the app") })
	mux.Handle("/llm/", http.StripPrefix("/llm", New(Options{Engine: eng, ModelID: "stories"})))
	app := httptest.NewServer(mux)
	defer app.Close()

	resp, err := http.Get(app.URL + "/hello")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "hello from the app", string(body))

	resp, err = http.Post(app.URL+"/llm/v1/completions", "application/json",
		strings.NewReader(`{"model":"stories","prompt":"Once upon a time","max_tokens":12,"temperature":0}`))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out completionResponse
	require.NoError(t, json.Unmarshal(body, &out))
	require.Equal(t, ", there was a little girl named Lily. She", out.Choices[0].Text)
	require.Equal(t, "stories", out.Model)

	resp, err = http.Get(app.URL + "/llm/v1/models")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"id":"stories"`)
}
