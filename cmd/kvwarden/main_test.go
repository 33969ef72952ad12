package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testenv"
)

// syncBuf is a goroutine-safe buffer (serve logs while the test reads).
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

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb syncBuf
	code := run(context.Background(), args, &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb})
	return result{code, out.String(), errb.String()}
}

// stories is cmd with the stories260K model flags, on the CPU: the tests
// compare with run.c's outputs, which a GPU run matches only within
// tolerances (checked by the engine's GPU tests).
func stories(t *testing.T, cmd string) []string {
	return []string{cmd, "--model", testenv.Model(t, "stories260K.bin"), "--tokenizer", testenv.Model(t, "tok512.bin"), "--device", "cpu"}
}

func TestGenerateGolden(t *testing.T) {
	args := stories(t, "generate")
	var golden struct {
		Cases []struct {
			Prompt    string `json:"prompt"`
			PromptIDs []int  `json:"prompt_token_ids"`
			Generated []int  `json:"generated_token_ids"`
			FirstBOS  int    `json:"first_bos_index"`
		} `json:"cases"`
	}
	raw, err := os.ReadFile(testenv.Golden(t, "stories260K_greedy.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &golden))
	require.NotEmpty(t, golden.Cases)
	for _, c := range golden.Cases {
		want := c.Generated
		if c.FirstBOS >= 0 {
			want = want[:c.FirstBOS]
		}
		// f32 KV: bit-exact against run.c.
		r := runCmd(t, "", append(args, "--json", "--kv-type", "f32", "--temperature", "0", "--max-context", "512", "-n", fmt.Sprint(len(want)), c.Prompt)...)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		var got generateJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), "stdout: %s", r.stdout)
		require.Equal(t, c.PromptIDs, got.PromptTokens, "prompt %q", c.Prompt)
		require.Equal(t, want, got.Tokens, "prompt %q", c.Prompt)
		require.Equal(t, "length", got.FinishReason)
		require.Positive(t, got.Timings.DecodeTokensPerS)
		require.Positive(t, got.Timings.PrefillTokensPerS)
		require.NotContains(t, r.stderr, "synthetic")
	}
}

func TestGenerateStreamsText(t *testing.T) {
	args := append(stories(t, "generate"), "--temperature", "0", "-n", "12")
	r := runCmd(t, "", append(args, "Once upon a time")...)
	require.Equal(t, 0, r.code, r.stderr)
	// The prompt is echoed before its continuation, as llama-cli does.
	require.Equal(t, "Once upon a time, there was a little girl named Lily. She\n", r.stdout)
	rn := runCmd(t, "", append(args, "--no-echo", "Once upon a time")...)
	require.Equal(t, ", there was a little girl named Lily. She\n", rn.stdout)
	// The prompt from stdin and from --prompt give the same text.
	r2 := runCmd(t, "Once upon a time\n", args...)
	require.Equal(t, r.stdout, r2.stdout)
	r3 := runCmd(t, "", append(args, "--prompt", "Once upon a time")...)
	require.Equal(t, r.stdout, r3.stdout)
	// A stop string ends the text before it.
	r4 := runCmd(t, "", append(args, "--stop", "Lily", "Once upon a time")...)
	require.Equal(t, 0, r4.code)
	require.Equal(t, "Once upon a time, there was a little girl named \n", r4.stdout)
}

func TestGenerateSyntheticNote(t *testing.T) {
	r := runCmd(t, "", "generate", "--model", "builtin:synthetic", "-n", "3", "--seed", "7", "hello")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "synthetic model")
	require.Contains(t, r.stderr, "gibberish")
}

// --seed 0 is a fixed seed: two sampled runs agree and --json reports it.
func TestGenerateSeedZeroIsFixed(t *testing.T) {
	args := []string{"generate", "-n", "12", "--temperature", "1.5", "--seed", "0", "--json", "hello"}
	r1, r2 := runCmd(t, "", args...), runCmd(t, "", args...)
	require.Equal(t, 0, r1.code, r1.stderr)
	out1, _, _ := strings.Cut(r1.stdout, `"timings"`)
	out2, _, _ := strings.Cut(r2.stdout, `"timings"`)
	require.Equal(t, out1, out2, "same tokens and text")
	require.Contains(t, out1, `"seed":0`)
	// without --seed the seed is random and reported
	r3 := runCmd(t, "", "generate", "-n", "12", "--temperature", "1.5", "--json", "hello")
	require.Equal(t, 0, r3.code, r3.stderr)
	require.Contains(t, r3.stdout, `"seed":`)
}

func TestGenerateRejectedExit3(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		args := append(stories(t, "generate"), "--max-context", "8", "Once upon a time there was a big dog")
		if asJSON {
			args = append(args, "--json")
		}
		r := runCmd(t, "", args...)
		require.Equal(t, 3, r.code, r.stderr)
		require.Empty(t, r.stdout, "nothing on stdout for a rejected request")
		require.Contains(t, r.stderr, "MaxContext 8")
		require.Contains(t, r.stderr, "139 tokens requested (prompt 11)")
		require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
	}
	r := runCmd(t, "", "generate", "--prompt", "")
	require.Equal(t, 3, r.code, "empty prompt is rejected: %s", r.stderr)
}

func TestStartupPoolCheckOneLine(t *testing.T) {
	// Invariant 1: MaxContext above what the pool holds refuses to start.
	r := runCmd(t, "", "generate", "--kv-pages", "4", "--page-size", "16", "--max-context", "1024", "hi")
	require.Equal(t, 1, r.code)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	require.Contains(t, last, "1024")
	require.Contains(t, last, "64")
	require.True(t, strings.HasPrefix(last, "kvwarden generate: "), last)
	require.Empty(t, r.stdout)
	for _, cmd := range []string{"serve", "audit"} {
		r := runCmd(t, "", cmd, "--kv-pages", "4", "--max-context", "1024")
		require.NotEqual(t, 0, r.code, "%s: %s", cmd, r.stdout+r.stderr)
		require.Contains(t, r.stdout+r.stderr, "1024")
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"generate", "--page-size", "-3", "x"}, "page-size"},
		{[]string{"generate", "--page-size", "abc", "x"}, "page-size"},
		{[]string{"generate", "--kv-memory", "12XB", "x"}, "kv-memory"},
		{[]string{"generate", "--kv-memory", "-5MiB", "x"}, "kv-memory"},
		{[]string{"generate", "--kv-pages", "8", "--kv-memory", "1MiB", "x"}, "kv-memory"},
		{[]string{"generate", "--host-offload", "lots", "x"}, "host-offload"},
		{[]string{"generate", "--device", "tpu", "x"}, "device"},
		{[]string{"generate", "--kv-checksum", "sometimes", "x"}, "kv-checksum"},
		{[]string{"generate", "--kv-type", "bf8", "x"}, "kv-type"},
		{[]string{"generate", "--weights", "huge", "x"}, "--weights"},
		{[]string{"generate", "--max-context", "-1", "x"}, "max-context"},
		{[]string{"generate", "--max-seqs", "-1", "x"}, "max-seqs"},
		{[]string{"generate", "--max-batch-tokens", "-1", "x"}, "max-batch-tokens"},
		{[]string{"generate", "--temperature", "-1", "x"}, "temperature"},
		{[]string{"generate", "--top-p", "1.5", "x"}, "top-p"},
		{[]string{"generate", "--top-k", "-2", "x"}, "top-k"},
		{[]string{"generate", "-n", "0", "x"}, "max-tokens"},
		{[]string{"generate", "--model", "/nonexistent/model.gguf", "x"}, "model"},
		{[]string{"generate", "-m", "/nonexistent/model.gguf", "x"}, "model.gguf"},
		{[]string{"generate", "--tokenizer", "tok.bin", "x"}, "tokenizer"},
		{[]string{"generate", "--bogus", "x"}, "bogus"},
		{[]string{"generate", "a", "b"}, "prompt"},
		{[]string{"serve", "--addr", "nohost"}, "addr"},
		{[]string{"serve", "--api-keys", "/nonexistent/keys"}, "api-keys"},
		{[]string{"serve", "--max-queue", "-1"}, "max-queue"},
		{[]string{"serve", "--log-level", "loud"}, "log-level"},
		{[]string{"serve", "--chat-template-file", "/nonexistent/t.jinja"}, "chat-template-file"},
		{[]string{"serve", "--cors-origin", "app.example"}, "cors-origin"},
		{[]string{"serve", "--reasoning-format", "deepseek-legacy"}, "reasoning-format"},
		{[]string{"serve", "--admin-keys", "/nonexistent/admin"}, "admin-keys"},
		{[]string{"serve", "--body-timeout", "-1s"}, "body-timeout"},
		{[]string{"serve", "--max-conns", "-1"}, "max-conns"},
		{[]string{"serve", "--max-conns-per-ip", "-2"}, "max-conns-per-ip"},
		{[]string{"audit", "--tenants", "1"}, "tenants"},
		{[]string{"audit", "--inject-fault", "gremlins"}, "inject-fault"},
		{[]string{"frobnicate"}, "frobnicate"},
		{nil, "usage"},
	}
	for _, c := range cases {
		r := runCmd(t, "", c.args...)
		require.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.flag, "%v", c.args)
		require.Empty(t, r.stdout)
	}
	r := runCmd(t, "", "generate", "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stderr, "-kv-checksum")

	bad := filepath.Join(t.TempDir(), "bad.jinja")
	require.NoError(t, os.WriteFile(bad, []byte("{% for %}"), 0o600))
	r = runCmd(t, "", "serve", "--chat-template-file", bad)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "chat-template-file")
	require.Contains(t, r.stderr, "syntax error")
}

func TestServeInProcess(t *testing.T) {
	testenv.NoGoroutineLeak(t, 4)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(keys, []byte("sk-alice-0001 alice\n"), 0o600))
	admin := filepath.Join(dir, "admin")
	require.NoError(t, os.WriteFile(admin, []byte("op-key-0123456789abcdef\n"), 0o600))
	tmpl := filepath.Join(dir, "chat.jinja")
	require.NoError(t, os.WriteFile(tmpl, []byte("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	var errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append(stories(t, "serve"), "--addr", "127.0.0.1:0", "--api-keys", keys, "--admin-keys", admin, "--kv-pages", "64", "--chat-template-file", tmpl),
			&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb, ready: func(a string) { addr <- a }})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("serve exited with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions",
		strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":12,"temperature":0}`))
	req.Header.Set("Authorization", "Bearer sk-alice-0001")
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"text":", there was a little girl named Lily. She"`)
	// /metrics needs an operator key; a tenant key is refused
	for key, want := range map[string]int{"": http.StatusUnauthorized, "sk-alice-0001": http.StatusForbidden, "op-key-0123456789abcdef": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "key %q", key)
	}
	require.NotContains(t, errb.String(), "kv-checksum off")

	// --chat-template-file replaces the model's template.
	req, _ = http.NewRequest(http.MethodPost, base+"/apply-template", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-alice-0001")
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.JSONEq(t, `{"prompt":"[user]hi"}`, string(body))

	cancel() // SIGINT
	select {
	case code := <-done:
		require.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
	log := errb.String()
	for _, want := range []string{"loading model", "model loaded", "kv pool", "listening", "shutting down", "engine closed",
		`metrics="1 operator keys (--admin-keys)"`, `level=WARN msg="--api-keys: keys shorter than 16 characters can be guessed`} {
		require.Contains(t, log, want)
	}
	require.NotContains(t, log, "non-loopback", "127.0.0.1 is loopback")
}

// serve with --kv-checksum off says loudly that pages go unverified, and
// --public-metrics opens /metrics despite --api-keys.
func TestServeChecksumOffWarnsAndPublicMetrics(t *testing.T) {
	testenv.NoGoroutineLeak(t, 4)
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("sk-alice-0001 alice\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	var errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--kv-pages", "16", "--kv-checksum", "off",
			"--api-keys", keys, "--public-metrics"},
			&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb, ready: func(a string) { addr <- a }})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("serve exited with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/metrics")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
	require.Regexp(t, `level=WARN msg="--kv-checksum off: KV pages are not verified`, errb.String())
	require.Contains(t, errb.String(), `metrics="public (--public-metrics)"`)
}

func TestAuditCleanAndFaultDetected(t *testing.T) {
	r := runCmd(t, "", "audit", "--json")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	var rep struct {
		Clean  bool `json:"clean"`
		Config struct {
			Runner string `json:"runner"`
		} `json:"config"`
		Tried struct {
			Requests           int `json:"requests"`
			OverLength         int `json:"over_length"`
			OverLengthRejected int `json:"over_length_rejected"`
			Aborted            int `json:"aborted"`
			CrossTenant        int `json:"cross_tenant_contaminated"`
		} `json:"tried"`
		Engine struct {
			Preemptions uint64 `json:"preemptions"`
		} `json:"engine"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.True(t, rep.Clean)
	require.Equal(t, "echo", rep.Config.Runner)
	require.Equal(t, 96, rep.Tried.Requests)
	require.Equal(t, rep.Tried.OverLength, rep.Tried.OverLengthRejected)
	require.Positive(t, rep.Tried.Aborted)
	require.Positive(t, rep.Engine.Preemptions)

	// The human report.
	r = runCmd(t, "", "audit", "--tenants", "4", "--requests", "4", "--rounds", "1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "result: CLEAN")

	// One request reads another tenant's page: the audit must fail.
	r = runCmd(t, "", "audit", "--json", "--inject-fault", "foreign-read")
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.False(t, rep.Clean)
	require.Positive(t, rep.Tried.CrossTenant)
	require.Contains(t, r.stderr, "isolation problems")
}

func TestAuditRealModel(t *testing.T) {
	r := runCmd(t, "", append(stories(t, "audit"), "--tenants", "4", "--requests", "3", "--rounds", "1", "--kv-pages", "24", "--max-context", "128")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "runner: model")
	require.Contains(t, r.stdout, "result: CLEAN")
}
