package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/audit"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testenv"
)

// slowRunner delays every forward step, so tests can act mid-stream.
type slowRunner struct {
	engine.Runner
	delay time.Duration
}

func (r slowRunner) Forward(b *model.Batch) error {
	time.Sleep(r.delay)
	return r.Runner.Forward(b)
}

// testAdminKey is the operator key start configures with keys.
const testAdminKey = "operator-key-0123456789"

type testServer struct {
	eng    *engine.Engine
	srv    *Server
	url    string
	cancel context.CancelFunc
	done   chan error
	client *http.Client
	// metricsKey is the API key scrape sends ("" when none is needed)
	metricsKey string
}

type setup struct {
	cfg   engine.Config
	echo  bool
	delay time.Duration
	keys  string
	drain time.Duration
	body  int64
	// publicMetrics sets Options.PublicMetrics
	publicMetrics bool
	// opts, when set, adjusts the Options before New
	opts func(*Options)
	// fail makes the engine's forward pass fail with this error
	fail error
	// logTo receives the server's log
	logTo io.Writer
}

// failingRunner fails every forward step with err.
type failingRunner struct {
	engine.Runner
	err error
}

func (r failingRunner) Forward(*model.Batch) error { return r.err }

// sep is the echo separator the tests use: the synthetic vocabulary's last
// token (byte 0xFF, never in the test prompts).
const sep = model.SyntheticVocab - 1

// start runs a Server on a real 127.0.0.1 listener over a synthetic-model
// engine (with the echo runner when s.echo) and checks, at cleanup, that
// the server stops, no page or lease is left held and no goroutine leaked.
func start(t *testing.T, s setup) *testServer {
	t.Helper()
	testenv.NoGoroutineLeak(t, 4)
	cfg := s.cfg
	if cfg.KVPages == 0 && cfg.KVMemory == 0 {
		cfg.KVPages = 64
	}
	if cfg.MaxContext == 0 {
		cfg.MaxContext = 256
	}
	var hooks engine.TestHooks
	if s.echo {
		// The echo model keeps token IDs in the KV cache: f32 holds them exactly.
		cfg.KVType = "f32"
		var echo *audit.Echo
		hooks.NewRunner = func(pool *kvcache.Pool) (engine.Runner, error) {
			var err error
			echo, err = audit.NewEcho(pool, sep, "")
			if err != nil {
				return nil, err
			}
			if s.fail != nil {
				return failingRunner{echo, s.fail}, nil
			}
			if s.delay > 0 {
				return slowRunner{echo, s.delay}, nil
			}
			return echo, nil
		}
		defer func() { echo.SetVocab(model.SyntheticVocab) }()
	}
	if s.logTo != nil {
		// The engine logs the details it keeps out of request errors.
		cfg.Logger = slog.New(slog.NewTextHandler(s.logTo, nil))
	}
	eng, err := engine.New(cfg, engine.WithTestHooks(hooks))
	require.NoError(t, err)
	var keys *Keys
	if s.keys != "" {
		keys, err = ParseKeys(strings.NewReader(s.keys), "keys")
		require.NoError(t, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if s.logTo != nil {
		log = slog.New(slog.NewTextHandler(s.logTo, nil))
	}
	o := Options{Engine: eng, ModelID: "test-model", Keys: keys, Logger: log, MaxBodyBytes: s.body,
		PublicMetrics: s.publicMetrics}
	if s.keys != "" && !s.publicMetrics {
		// Scraping needs an operator key.
		o.AdminKeys, err = ParseAdminKeys(strings.NewReader(testAdminKey+"\n"), "admin")
		require.NoError(t, err)
	}
	if s.opts != nil {
		s.opts(&o)
	}
	srv := New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	drain := s.drain
	if drain == 0 {
		drain = 5 * time.Second
	}
	ts := &testServer{eng: eng, srv: srv, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}}
	if o.AdminKeys != nil && !s.publicMetrics {
		ts.metricsKey = testAdminKey
	}
	go func() { ts.done <- srv.Serve(ctx, ln, drain) }()
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		ts.stop(t)
		requireNoPageLeaks(t, eng)
		require.NoError(t, eng.Close())
	})
	return ts
}

func (ts *testServer) stop(t *testing.T) {
	t.Helper()
	ts.cancel()
	select {
	case err := <-ts.done:
		require.NoError(t, err)
		ts.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
}

// requireNoPageLeaks waits for every request to end and every page and
// lease to come back (prefix-cache pages may stay, sealed and leased).
func requireNoPageLeaks(t *testing.T, eng *engine.Engine) {
	t.Helper()
	var st engine.Stats
	deadline := time.Now().Add(10 * time.Second)
	for {
		st = eng.Stats()
		p := st.Pool
		// Pages the prefix cache holds stay behind a prefix lease.
		if st.Running == 0 && st.Waiting == 0 && st.Swapped == 0 && p.Owned == 0 && p.Releasing <= p.PrefixLeases &&
			p.StepLeases == 0 && p.CopyLeases == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pages or requests still held: running %d waiting %d swapped %d, pool %+v", st.Running, st.Waiting, st.Swapped, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Zero(t, st.IsolationFailures)
	require.Zero(t, st.Pool.IsolationViolations)
	require.Zero(t, st.Pool.ChecksumFailures)
	require.Equal(t, st.Pool.Pages, st.Pool.Free+st.Pool.Sealed+st.Pool.Releasing, "pages neither free nor held by the prefix cache")
}

func (ts *testServer) post(t *testing.T, path, key string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(http.MethodPost, ts.url+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, raw
}

// tokPrompt is an echo prompt: BOS, the bytes of text, then the separator.
// The echo model then generates text repeated.
func tokPrompt(text string) []int {
	p := []int{model.SyntheticBOS}
	for _, b := range []byte(text) {
		p = append(p, model.SyntheticByteOffset+int(b))
	}
	return append(p, sep)
}

func echoed(text string, n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteByte(text[i%len(text)])
	}
	return b.String()
}

type errBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func requireAPIError(t *testing.T, resp *http.Response, raw []byte, status int, code string) errBody {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "body: %s", raw)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var e errBody
	require.NoError(t, json.Unmarshal(raw, &e), "body: %s", raw)
	require.NotEmpty(t, e.Error.Message)
	require.NotEmpty(t, e.Error.Type)
	if code != "" {
		require.NotNil(t, e.Error.Code, "body: %s", raw)
		require.Equal(t, code, *e.Error.Code)
	}
	return e
}

// sse reads a server-sent event stream: the data payloads, and whether it
// ended with [DONE].
func sse(t *testing.T, r io.Reader) (events []map[string]any, done bool) {
	t.Helper()
	events, done, err := readSSE(r)
	require.NoError(t, err)
	return events, done
}

// readSSE is sse for goroutines other than the test's: it returns what is
// wrong instead of failing the test.
func readSSE(r io.Reader) (events []map[string]any, done bool, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return events, done, fmt.Errorf("line %q is not an SSE data line", line)
		}
		if done {
			return events, done, fmt.Errorf("data after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return events, done, fmt.Errorf("event %q: %w", data, err)
		}
		events = append(events, ev)
	}
	return events, done, sc.Err()
}

func streamText(t *testing.T, events []map[string]any, chat bool) (text, finish string) {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		choices, _ := ev["choices"].([]any)
		for _, c := range choices {
			cm := c.(map[string]any)
			if chat {
				if d, ok := cm["delta"].(map[string]any); ok {
					if s, ok := d["content"].(string); ok {
						b.WriteString(s)
					}
				}
			} else {
				b.WriteString(cm["text"].(string))
			}
			if f, ok := cm["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	return b.String(), finish
}

func TestCompletionsNonStreaming(t *testing.T) {
	ts := start(t, setup{echo: true})
	resp, raw := ts.post(t, "/v1/completions", "", map[string]any{
		"model": "test-model", "prompt": tokPrompt("abc"), "max_tokens": 7, "temperature": 0,
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var c completionResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Equal(t, "text_completion", c.Object)
	require.Len(t, c.Choices, 1)
	require.Equal(t, "abcabca", c.Choices[0].Text)
	require.Equal(t, "length", *c.Choices[0].FinishReason)
	require.Equal(t, 5, c.Usage.PromptTokens)
	require.Equal(t, 7, c.Usage.CompletionTokens)
	require.Equal(t, 12, c.Usage.TotalTokens)
	require.True(t, strings.HasPrefix(c.ID, "cmpl-"))

	// A text prompt through the real synthetic forward pass.
	ts2 := start(t, setup{})
	resp, raw = ts2.post(t, "/v1/completions", "", map[string]any{"prompt": "Hello", "max_tokens": 4, "temperature": 0})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Equal(t, 6, c.Usage.PromptTokens) // BOS + 5 bytes
	require.LessOrEqual(t, c.Usage.CompletionTokens, 4)
}

func TestChatStreaming(t *testing.T) {
	ts := start(t, setup{echo: true})
	body := map[string]any{
		"model":    "test-model",
		"messages": []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": []map[string]any{{"type": "text", "text": "Hi"}}}},
		"stream":   true, "max_tokens": 5, "stream_options": map[string]any{"include_usage": true},
	}
	resp, raw := ts.post(t, "/v1/chat/completions", "", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events, done := sse(t, bytes.NewReader(raw))
	require.True(t, done, "stream must end with [DONE]")
	require.GreaterOrEqual(t, len(events), 3)
	first := events[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	require.Equal(t, "assistant", first["role"])
	text, finish := streamText(t, events, true)
	require.Equal(t, "length", finish)
	// The echo model repeats the last prompt token. The built-in model has
	// no chat template, so the ChatML fallback renders the prompt, which
	// ends with "<|im_start|>assistant\n".
	require.Equal(t, "\n\n\n\n\n", text)
	last := events[len(events)-1]
	require.Empty(t, last["choices"])
	u := last["usage"].(map[string]any)
	require.EqualValues(t, 5, u["completion_tokens"])
	for _, ev := range events {
		require.Equal(t, "chat.completion.chunk", ev["object"])
	}

	// Non-streaming chat.
	delete(body, "stream")
	delete(body, "stream_options")
	resp, raw = ts.post(t, "/v1/chat/completions", "", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var c chatResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Equal(t, "chat.completion", c.Object)
	require.Equal(t, "assistant", c.Choices[0].Message.Role)
	require.Equal(t, "\n\n\n\n\n", *c.Choices[0].Message.Content)
}

func TestConcurrentStreamingTenants(t *testing.T) {
	const tenants, per = 4, 6
	var keys strings.Builder
	for i := range tenants {
		fmt.Fprintf(&keys, "key-tenant-%d tenant-%d\n", i, i)
	}
	// A small pool: concurrent streams force preemption.
	ts := start(t, setup{echo: true, keys: keys.String(), cfg: engine.Config{KVPages: 16, MaxContext: 96, HostTierBytes: 16 << 20}})
	var wg sync.WaitGroup
	errs := make(chan error, tenants*per)
	for i := range tenants {
		for j := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				marker := fmt.Sprintf("T%dR%d-%s|", i, j, strings.Repeat(string(rune('a'+i)), 5+j))
				raw, err := json.Marshal(map[string]any{"prompt": tokPrompt(marker), "max_tokens": 40, "stream": true, "temperature": 0})
				if err != nil {
					errs <- err
					return
				}
				req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/completions", bytes.NewReader(raw))
				req.Header.Set("Authorization", fmt.Sprintf("Bearer key-tenant-%d", i))
				resp, err := ts.client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					errs <- fmt.Errorf("status %d: %s", resp.StatusCode, b)
					return
				}
				events, done, err := readSSE(resp.Body)
				if err != nil {
					errs <- err
					return
				}
				text, finish := streamText(t, events, false)
				if !done || finish != "length" || text != echoed(marker, 40) {
					errs <- fmt.Errorf("tenant %d request %d: done %v finish %q text %q, want %q", i, j, done, finish, text, echoed(marker, 40))
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := ts.eng.Stats()
	t.Logf("preemptions %d, swap-outs %d, prefix hits %d", st.Preemptions, st.SwapOuts, st.PrefixHits)
	require.NotZero(t, st.Preemptions, "the small pool must force preemption")
}

func TestDisconnectMidStreamAborts(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 5 * time.Millisecond})
	for _, stream := range []bool{true, false} {
		before := ts.eng.Stats().Finished["abort"]
		raw, _ := json.Marshal(map[string]any{"prompt": tokPrompt("xyz"), "max_tokens": 200, "stream": stream})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions", bytes.NewReader(raw))
		go func() {
			if !stream {
				time.Sleep(100 * time.Millisecond)
				cancel()
			}
		}()
		resp, err := ts.client.Do(req)
		if stream {
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			rd := bufio.NewReader(resp.Body)
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(line, "data: "))
			cancel() // the client goes away mid-stream
			resp.Body.Close()
		} else {
			require.Error(t, err)
		}
		require.Eventually(t, func() bool { return ts.eng.Stats().Finished["abort"] > before }, 5*time.Second, 10*time.Millisecond,
			"the disconnect must abort the engine request (stream=%v)", stream)
		requireNoPageLeaks(t, ts.eng)
	}
	body := scrape(t, ts)
	require.Contains(t, body, `kvwarden_requests_total{endpoint="completions",outcome="abort"} 2`)
}

func scrape(t *testing.T, ts *testServer) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.url+"/metrics", nil)
	if ts.metricsKey != "" {
		req.Header.Set("Authorization", "Bearer "+ts.metricsKey)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(raw)
}

func TestMalformedRequests(t *testing.T) {
	ts := start(t, setup{echo: true, body: 4096, opts: func(o *Options) { o.StrictModelID = true }})
	big := `{"prompt": "` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, path string
		body       any
		status     int
		code       string
		param      string
	}{
		{"invalid json", "/v1/completions", `{"prompt": "hi",`, 400, "invalid_json", ""},
		{"not json", "/v1/completions", `hello`, 400, "invalid_json", ""},
		{"empty body", "/v1/completions", ``, 400, "invalid_json", ""},
		{"array body", "/v1/completions", `[1,2]`, 400, "invalid_json", ""},
		{"trailing data", "/v1/completions", `{"prompt":"a"} {}`, 400, "invalid_json", ""},
		{"max_tokens string", "/v1/completions", `{"prompt":"a","max_tokens":"ten"}`, 400, "invalid_type", "max_tokens"},
		{"temperature string", "/v1/completions", `{"prompt":"a","temperature":"hot"}`, 400, "invalid_type", "temperature"},
		{"stream string", "/v1/completions", `{"prompt":"a","stream":"yes"}`, 400, "invalid_type", "stream"},
		{"prompt object", "/v1/completions", `{"prompt":{"a":1}}`, 400, "invalid_type", "prompt"},
		{"missing prompt", "/v1/completions", `{"max_tokens":3}`, 400, "missing_required_parameter", "prompt"},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "empty_prompt", "prompt"},
		{"temperature range", "/v1/completions", `{"prompt":"a","temperature":5}`, 400, "invalid_value", "temperature"},
		{"top_p range", "/v1/completions", `{"prompt":"a","top_p":0}`, 400, "invalid_value", "top_p"},
		{"max_tokens zero", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "invalid_value", "max_tokens"},
		{"n too many", "/v1/completions", `{"prompt":"a","n":129}`, 400, "invalid_value", "n"},
		{"stop type", "/v1/completions", `{"prompt":"a","stop":5}`, 400, "invalid_type", "stop"},
		{"token out of vocab", "/v1/completions", `{"prompt":[1,99999]}`, 400, "invalid_value", ""},
		{"messages string", "/v1/chat/completions", `{"messages":"hi"}`, 400, "invalid_type", "messages"},
		{"messages empty", "/v1/chat/completions", `{"messages":[]}`, 400, "missing_required_parameter", "messages"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "invalid_value", "messages[0].role"},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "unsupported_value", "messages[0].content"},
		{"unknown model (strict)", "/v1/completions", `{"model":"gpt-4","prompt":"a"}`, 404, "model_not_found", "model"},
		{"too large", "/v1/completions", big, 413, "request_too_large", ""},
		{"no route", "/v1/moderations", `{}`, 404, "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, c.path, "", c.body)
			e := requireAPIError(t, resp, raw, c.status, c.code)
			if c.param != "" {
				require.NotNil(t, e.Error.Param, "%s", raw)
				require.Equal(t, c.param, *e.Error.Param)
			}
		})
	}
	// Wrong method and content type.
	resp, err := ts.client.Get(ts.url + "/v1/completions")
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	requireAPIError(t, resp, raw, 405, "")
	req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/completions", strings.NewReader(`{"prompt":"a"}`))
	req.Header.Set("Content-Type", "text/plain")
	resp, err = ts.client.Do(req)
	require.NoError(t, err)
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	requireAPIError(t, resp, raw, 415, "")

	m := scrape(t, ts)
	require.Contains(t, m, `kvwarden_rejections_total{reason="body_too_large"} 1`)
	require.Contains(t, m, `kvwarden_rejections_total{reason="model_not_found"} 1`)
	require.Equal(t, uint64(0), ts.eng.Stats().Pool.Allocs, "no malformed request may reach the pool")
}

func TestPromptTooLong(t *testing.T) {
	ts := start(t, setup{echo: true, cfg: engine.Config{MaxContext: 64}})
	long := make([]int, 80)
	for i := range long {
		long[i] = model.SyntheticByteOffset + 'a'
	}
	for _, stream := range []bool{false, true} {
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": long, "stream": stream})
		e := requireAPIError(t, resp, raw, 400, "context_length_exceeded")
		require.Contains(t, e.Error.Message, "64")
		require.Contains(t, e.Error.Message, "80")
	}
	resp, raw := ts.post(t, "/v1/chat/completions", "", map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("long ", 40)}}})
	requireAPIError(t, resp, raw, 400, "context_length_exceeded")
	require.Equal(t, uint64(0), ts.eng.Stats().Pool.Allocs, "rejected before any page is allocated")
	require.Contains(t, scrape(t, ts), `kvwarden_rejections_total{reason="prompt_too_long"} 3`)
}

func TestAuth(t *testing.T) {
	ts := start(t, setup{echo: true, keys: "# keys\nsecret-aaaa alice\nsecret-bbbb bob\n"})
	body := map[string]any{"prompt": tokPrompt("hi"), "max_tokens": 2, "user": "bob", "tenant": "bob"}
	resp, raw := ts.post(t, "/v1/completions", "", body)
	requireAPIError(t, resp, raw, 401, "invalid_api_key")
	require.NotEmpty(t, resp.Header.Get("WWW-Authenticate"))
	resp, raw = ts.post(t, "/v1/completions", "secret-cccc", body)
	requireAPIError(t, resp, raw, 401, "invalid_api_key")
	req, _ := http.NewRequest(http.MethodGet, ts.url+"/v1/models", nil)
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	requireAPIError(t, resp, raw, 401, "invalid_api_key")

	resp, raw = ts.post(t, "/v1/completions", "secret-aaaa", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	req.Header.Set("Authorization", "Bearer secret-bbbb")
	resp, err = ts.client.Do(req)
	require.NoError(t, err)
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &models))
	require.Equal(t, "test-model", models.Data[0].ID)
	// Health needs no key; metrics, which aggregate every tenant's
	// traffic, need an operator key: a tenant key gets 403.
	resp, err = ts.client.Get(ts.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, key := range []string{"", "secret-cccc"} {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/metrics", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := ts.client.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		requireAPIError(t, resp, raw, 401, "invalid_api_key")
		require.NotContains(t, string(raw), "kvwarden_kv_pages")
	}
	req, _ = http.NewRequest(http.MethodGet, ts.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer secret-aaaa")
	resp, err = ts.client.Do(req)
	require.NoError(t, err)
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	requireAPIError(t, resp, raw, 403, "forbidden")
	require.NotContains(t, string(raw), "kvwarden_kv_pages")
	require.Equal(t, testAdminKey, ts.metricsKey)
	require.Contains(t, scrape(t, ts), `kvwarden_rejections_total{reason="unauthorized"} 5`)

	// An explicit option opens them.
	open := start(t, setup{echo: true, keys: "secret-aaaa alice\n", publicMetrics: true})
	require.Empty(t, open.metricsKey)
	require.Contains(t, scrape(t, open), "kvwarden_kv_pages_capacity")
}

// Response ids are random: they do not count requests, so one tenant
// cannot learn how many requests others sent between two of its own.
func TestResponseIDsAreUnguessable(t *testing.T) {
	ts := start(t, setup{echo: true})
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": tokPrompt("id"), "max_tokens": 1})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var c completionResponse
		require.NoError(t, json.Unmarshal(raw, &c))
		require.Regexp(t, `^cmpl-[A-Z2-7]{26}$`, c.ID)
		require.False(t, seen[c.ID])
		seen[c.ID] = true
	}
	resp, raw := ts.post(t, "/v1/chat/completions", "", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var c chatResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Regexp(t, `^chatcmpl-[A-Z2-7]{26}$`, c.ID)
}

// A step failure that is not an isolation error reaches the client as
// generic text; its details, which can name other requests and tenants,
// are logged under the response id.
func TestInternalErrorIsGeneric(t *testing.T) {
	var logb syncBuf
	secret := errors.New("kernel fault while serving request 4242 of tenant mallory")
	ts := start(t, setup{echo: true, fail: secret, logTo: &logb})
	for _, stream := range []bool{false, true} {
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": tokPrompt("x"), "max_tokens": 2, "stream": stream})
		require.NotContains(t, string(raw), "mallory")
		require.NotContains(t, string(raw), "4242")
		e := requireAPIError(t, resp, raw, 500, "internal_error")
		require.Contains(t, e.Error.Message, "server log under id cmpl-")
		id := e.Error.Message[strings.Index(e.Error.Message, "cmpl-"):]
		// The request's own error is generic too (the engine never tells a
		// request about another); the details are in the engine's log line
		// for the failed step, the response id in the server's.
		require.Regexp(t, `level=ERROR msg="request failed" id=`+id+` request=\d+`, logb.String())
		require.Regexp(t, `level=ERROR msg="engine: forward step failed" .*mallory`, logb.String())
	}
}

func TestTenantFromKeyOnly(t *testing.T) {
	// Same prompt from two tenants: the second cannot hit the first's
	// prefix cache, whatever its body claims. Within one tenant it does.
	ts := start(t, setup{echo: true, keys: "key-alice-1 alice\nkey-alice-2 alice\nkey-bob-123 bob\n"})
	prompt := tokPrompt(strings.Repeat("shared prefix ", 6))
	cached := func(key string) int {
		resp, raw := ts.post(t, "/v1/completions", key, map[string]any{"prompt": prompt, "max_tokens": 2, "user": "alice"})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var c completionResponse
		require.NoError(t, json.Unmarshal(raw, &c))
		return c.Usage.PromptTokensDetails.CachedTokens
	}
	require.Zero(t, cached("key-alice-1"))
	require.Zero(t, cached("key-bob-123"), "another tenant must never hit alice's prefix")
	require.Positive(t, cached("key-alice-2"), "the same tenant (another key) shares the prefix")
}

func TestOverload429(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 3 * time.Millisecond, cfg: engine.Config{MaxSeqs: 1, MaxQueue: 1}})
	const n = 12
	type out struct {
		status int
		retry  string
		body   []byte
	}
	outs := make(chan out, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _ := json.Marshal(map[string]any{"prompt": tokPrompt(fmt.Sprintf("r%d", i)), "max_tokens": 20})
			resp, err := ts.client.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(raw))
			if err != nil {
				outs <- out{status: -1, body: []byte(err.Error())}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			outs <- out{resp.StatusCode, resp.Header.Get("Retry-After"), b}
		}()
	}
	wg.Wait()
	close(outs)
	ok, limited := 0, 0
	for o := range outs {
		switch o.status {
		case http.StatusOK:
			var c completionResponse
			require.NoError(t, json.Unmarshal(o.body, &c))
			require.Equal(t, 20, c.Usage.CompletionTokens, "a 200 carries the complete output")
			ok++
		case http.StatusTooManyRequests:
			require.NotEmpty(t, o.retry, "429 needs Retry-After")
			var e errBody
			require.NoError(t, json.Unmarshal(o.body, &e))
			require.Equal(t, "server_overloaded", *e.Error.Code)
			limited++
		default:
			t.Fatalf("status %d: %s", o.status, o.body)
		}
	}
	require.Positive(t, ok)
	require.Positive(t, limited, "a queue of 1 must turn some of %d concurrent requests away", n)
	require.Contains(t, scrape(t, ts), fmt.Sprintf(`kvwarden_rejections_total{reason="overloaded"} %d`, limited))
}

func TestGracefulShutdownDrains(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 5 * time.Millisecond, drain: 20 * time.Second})
	raw, _ := json.Marshal(map[string]any{"prompt": tokPrompt("drain"), "max_tokens": 60, "stream": true})
	resp, err := ts.client.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	_, err = rd.ReadString('\n')
	require.NoError(t, err)

	ts.cancel() // SIGTERM
	require.Eventually(t, func() bool { return ts.srv.draining.Load() }, 5*time.Second, time.Millisecond)
	// New connections are refused.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.url, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 5*time.Second, 10*time.Millisecond)
	// The stream in flight finishes completely.
	events, done := sse(t, rd)
	resp.Body.Close()
	require.True(t, done)
	text, finish := streamText(t, events, false)
	require.Equal(t, "length", finish)
	require.Len(t, text, 59) // the first chunk was read above
	require.NoError(t, <-ts.done)
	ts.done <- nil
}

func TestGracefulShutdownAbortsAfterTimeout(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 10 * time.Millisecond, drain: 200 * time.Millisecond, cfg: engine.Config{MaxContext: 1000, KVPages: 128}})
	// One stream and one non-streaming request that cannot finish in time.
	raw, _ := json.Marshal(map[string]any{"prompt": tokPrompt("slow"), "max_tokens": 900, "stream": true})
	resp, err := ts.client.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	plain := make(chan *http.Response, 1)
	go func() {
		raw, _ := json.Marshal(map[string]any{"prompt": tokPrompt("slow2"), "max_tokens": 900})
		r, err := ts.client.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(raw))
		if err != nil {
			plain <- nil
			return
		}
		plain <- r
	}()
	require.Eventually(t, func() bool { return ts.eng.Stats().Running == 2 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	ts.cancel()
	events, done := sse(t, resp.Body)
	resp.Body.Close()
	require.False(t, done, "an aborted stream must not end with [DONE]")
	last := events[len(events)-1]
	require.Contains(t, last, "error", "an aborted stream ends with an error event")
	r := <-plain
	require.NotNil(t, r)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	requireAPIError(t, r, b, http.StatusServiceUnavailable, "server_shutting_down")
	require.NoError(t, <-ts.done)
	ts.done <- nil
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestMetricsExposition(t *testing.T) {
	ts := start(t, setup{echo: true})
	resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": tokPrompt("m"), "max_tokens": 3, "stream": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	m := scrape(t, ts)
	for _, name := range []string{
		`kvwarden_requests_total{endpoint="completions",outcome="length"} 1`,
		"kvwarden_completion_tokens_total 3",
		"kvwarden_time_to_first_token_seconds_bucket",
		"kvwarden_inter_token_seconds_count 2",
		`kvwarden_kv_pages{state="free"}`,
		"kvwarden_kv_pages_capacity 64",
		`kvwarden_kv_deferred_releases_total{outcome="freed"}`,
		"kvwarden_kv_deferred_release_duration_seconds_bucket",
		"kvwarden_kv_checksum_failures_total 0",
		"kvwarden_kv_isolation_violations_total 0",
		"kvwarden_isolation_failures_total 0",
		`kvwarden_host_tier_bytes{kind="used"}`,
		`kvwarden_engine_finished_total{reason="length"} 1`,
		"kvwarden_engine_step_seconds_bucket",
		"kvwarden_prefix_cache_spills_total 0",
		"kvwarden_prefix_cache_host_hits_total 0",
		"kvwarden_prefix_cache_host_entries 0",
	} {
		require.Contains(t, m, name)
	}
}

// syncBuf is a goroutine-safe buffer for a log that handlers write to.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// "seed": 0 is a fixed seed like any other; an absent seed is random.
func TestSeedZeroIsFixed(t *testing.T) {
	ts := start(t, setup{})
	text := func(body map[string]any) string {
		resp, raw := ts.post(t, "/v1/completions", "", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var c completionResponse
		require.NoError(t, json.Unmarshal(raw, &c))
		return c.Choices[0].Text
	}
	body := map[string]any{"prompt": "hello", "max_tokens": 16, "temperature": 1.5, "seed": 0}
	require.Equal(t, text(body), text(body))
	delete(body, "seed")
	require.NotEqual(t, text(body), text(body), "no seed: each request draws its own")
}
