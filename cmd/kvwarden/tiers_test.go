package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testenv"
)

// serveProc is an in-process `kvwarden serve`.
type serveProc struct {
	base   string
	client *http.Client
	stop   func() // graceful (SIGINT); checks the exit status
}

func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	var errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--device", "cpu"}, args...),
			&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb, ready: func(a string) { addr <- a }})
	}()
	p := &serveProc{client: &http.Client{Transport: &http.Transport{}}}
	select {
	case a := <-addr:
		p.base = "http://" + a
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		p.client.CloseIdleConnections()
		cancel()
		select {
		case code := <-done:
			require.Equal(t, 0, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not shut down")
		}
	}
	t.Cleanup(p.stop)
	return p
}

func (p *serveProc) do(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := p.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// complete runs the long prompt for key and returns its text and cached tokens.
func (p *serveProc) complete(t *testing.T, key string) (string, int) {
	t.Helper()
	const prompt = "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog."
	body, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": 8, "temperature": 0})
	code, raw := p.do(t, http.MethodPost, "/v1/completions", key, string(body))
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var out struct {
		Choices []struct{ Text string }
		Usage   struct {
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	cached := 0
	if out.Usage.Details != nil {
		cached = out.Usage.Details.Cached
	}
	return out.Choices[0].Text, cached
}

// TestServeDiskTier, through `kvwarden serve` and its flags: alice's long
// prompt is a prefix hit from disk after a graceful restart with the same
// --kv-key-file, never bob's; DELETE /v1/admin/tenants/alice/kv erases it
// (device and disk); with another key file the prompt is a miss, with no
// error.
func TestServeDiskTier(t *testing.T) {
	testenv.NoGoroutineLeak(t, 4)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	const alice, bob, op = "sk-alice-0123456789", "sk-bob-0123456789ab", "op-key-0123456789abcdef"
	keys := write("keys", alice+" alice\n"+bob+" bob\n")
	admin := write("admin", op+"\n")
	keyA := write("a.key", strings.Repeat("a1", 32)+"\n")
	keyB := write("b.key", strings.Repeat("b2", 32)+"\n")
	disk := filepath.Join(dir, "kv")
	flags := func(key string) []string {
		return []string{"--api-keys", keys, "--admin-keys", admin, "--kv-pages", "64", "--host-offload", "1MiB",
			"--kv-disk", disk, "--kv-disk-budget", "4MiB", "--kv-key-file", key}
	}

	s := startServe(t, flags(keyA)...)
	want, cached := s.complete(t, alice)
	require.Zero(t, cached)
	s.stop() // writes the prefix cache to disk
	files, err := filepath.Glob(filepath.Join(disk, "*.kvp"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	s = startServe(t, flags(keyA)...)
	text, cached := s.complete(t, bob)
	require.Zero(t, cached, "bob never hits alice's pages")
	require.Equal(t, want, text)
	text, cached = s.complete(t, alice)
	require.Equal(t, 32, cached, "alice's prefix from disk")
	require.Equal(t, want, text)
	code, raw := s.do(t, http.MethodDelete, "/v1/admin/tenants/alice/kv", alice, "")
	require.Equal(t, http.StatusForbidden, code, "%s", raw)
	code, raw = s.do(t, http.MethodDelete, "/v1/admin/tenants/alice/kv", op, "")
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var res struct {
		DiskFiles   int `json:"disk_files"`
		DevicePages int `json:"prefix_device_pages"`
	}
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Equal(t, len(files), res.DiskFiles, "%s", raw)
	require.Positive(t, res.DevicePages, "%s", raw)
	text, cached = s.complete(t, alice)
	require.Zero(t, cached, "erased: a miss")
	require.Equal(t, want, text)
	code, raw = s.do(t, http.MethodGet, "/metrics", op, "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `kvwarden_disk_tier_pages_total{event="hit"} 2`)
	s.stop()

	s = startServe(t, flags(keyB)...)
	text, cached = s.complete(t, alice)
	require.Zero(t, cached, "another key file: a miss")
	require.Equal(t, want, text)
	s.stop()
}
