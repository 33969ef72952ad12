package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/model"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-V"}} {
		t.Run(args[0], func(t *testing.T) {
			r := runCmd(t, "", args...)
			require.Equal(t, 0, r.code, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			require.Len(t, lines, 5, r.stdout)
			require.True(t, strings.HasPrefix(lines[0], "kvwarden "), r.stdout)
			require.Contains(t, lines[2], runtime.Version())
			require.Contains(t, lines[3], "(kernels: ")
			require.True(t, strings.HasPrefix(lines[4], "cuda:   available") || strings.HasPrefix(lines[4], "cuda:   unavailable"), lines[4])
		})
	}
	r := runCmd(t, "", "version", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var v versionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, runtime.Version(), v.Go)
	require.NotEmpty(t, v.Version)
	require.NotEmpty(t, v.CPUKernels)
	require.Positive(t, v.CPUCores)
	require.NotEmpty(t, v.CUDA)
	require.Equal(t, 2, runCmd(t, "", "version", "extra").code)
}

func TestHelpShowsDoubleDashAndEnvironment(t *testing.T) {
	for _, cmd := range []string{"generate", "serve", "chat", "audit", "pull"} {
		t.Run(cmd, func(t *testing.T) {
			r := runCmd(t, "", cmd, "-h")
			require.Equal(t, 0, r.code)
			require.Contains(t, r.stderr, "KVWARDEN_")
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
					// Only one-letter shorthands keep one dash.
					name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
					require.Len(t, name, 1, "single-dash flag in help: %q", line)
				}
			}
		})
	}
	r := runCmd(t, "", "generate", "-h")
	require.Contains(t, r.stderr, "  --max-context tokens\n")
	require.Contains(t, r.stderr, "[$KVWARDEN_MAX_CONTEXT]")
	require.Contains(t, r.stderr, `(default "handoff") [$KVWARDEN_KV_CHECKSUM]`)
}

// Flags from the environment, with the command line winning.
func TestEnvironmentFlags(t *testing.T) {
	args := append(stories(t, "generate"), "--temperature", "0", "--json", "Once upon a time")
	tokens := func(r result) int {
		t.Helper()
		require.Equal(t, 0, r.code, r.stderr)
		var out generateJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return len(out.Tokens)
	}
	t.Setenv("KVWARDEN_MAX_TOKENS", "3")
	require.Equal(t, 3, tokens(runCmd(t, "", args...)))
	require.Equal(t, 5, tokens(runCmd(t, "", append(args, "-n", "5")...)))
	require.Equal(t, 4, tokens(runCmd(t, "", append(args, "--max-tokens", "4")...)))
	t.Setenv("KVWARDEN_MAX_CONTEXT", "lots")
	r := runCmd(t, "", args...)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `KVWARDEN_MAX_CONTEXT="lots" (--max-context)`)
}

func TestNotAModelFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, []byte("<html><body>404 Not Found</body></html>\n"), 0o600))
	r := runCmd(t, "", "generate", "--model", path, "--device", "cpu", "hi")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not a GGUF or llama2.c file: "+path)
	require.Contains(t, r.stderr, "it looks like a text file")
	require.Empty(t, r.stdout)
}

// serve binds its address before it loads the model: a busy port is the
// error, not the (here unloadable) model.
func TestServeBindsBeforeLoading(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	bogus := filepath.Join(t.TempDir(), "bogus.gguf")
	require.NoError(t, os.WriteFile(bogus, []byte("not a model at all"), 0o600))
	r := runCmd(t, "", "serve", "--addr", busy.Addr().String(), "--model", bogus, "--device", "cpu")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--addr "+busy.Addr().String())
	require.Contains(t, r.stderr, "address already in use")
	require.NotContains(t, r.stderr, "not a GGUF")
	require.NotContains(t, r.stderr, "loading model")

	// A free port with the bogus model: the listener comes first, then the
	// model fails to load and serve stops.
	var listened []string
	var errb syncBuf
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--model", bogus, "--device", "cpu"},
		&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb, listening: func(a string) { listened = append(listened, a) }})
	require.Equal(t, 1, code)
	require.Len(t, listened, 1, "serve listened before loading")
	log := errb.String()
	require.Contains(t, log, "not a GGUF or llama2.c file")
	require.Less(t, strings.Index(log, "msg=listening"), strings.Index(log, "msg=\"loading model\""), log)
}

// chatReference generates the replies kvwarden chat should give: greedy,
// on the same engine settings, each turn rendered with the whole
// conversation so far.
func chatReference(t *testing.T, maxTokens int, turns ...string) []string {
	t.Helper()
	eng, err := engine.New(engine.Config{ModelPath: model.BuiltinStories, Device: "cpu"})
	require.NoError(t, err)
	defer eng.Close()
	var history []chat.Message
	var replies []string
	for _, turn := range turns {
		history = append(history, chat.Message{Role: "user", Content: turn})
		prompt, err := eng.ApplyChatTemplate(history, engine.ChatOptions{AddGenerationPrompt: true})
		require.NoError(t, err)
		res, err := eng.Generate(context.Background(), engine.Request{Prompt: prompt, ParseSpecial: true, MaxTokens: maxTokens, Tenant: "default"})
		require.NoError(t, err)
		replies = append(replies, res.Text)
		history = append(history, chat.Message{Role: "assistant", Content: res.Text})
	}
	return replies
}

func TestChatPiped(t *testing.T) {
	args := []string{"chat", "--device", "cpu", "--temperature", "0", "--max-tokens", "8"}
	want := chatReference(t, 8, "Hello", "How are you?")
	require.NotEqual(t, want[0], want[1])
	for _, c := range []struct {
		name, stdin, stdout string
	}{
		{"two turns with history", "Hello\nHow are you?\n", want[0] + "\n" + want[1] + "\n"},
		{"blank lines skipped, no final newline", "\n  \nHello\nHow are you?", want[0] + "\n" + want[1] + "\n"},
		{"continued line", "Hel\\\nlo\n", chatReference(t, 8, "Hel\nlo")[0] + "\n"},
		{"/bye leaves", "Hello\n/bye\nHow are you?\n", want[0] + "\n"},
		{"/clear forgets", "Hello\n/clear\nHow are you?\n", want[0] + "\n" + chatReference(t, 8, "How are you?")[0] + "\n"},
		{"nothing", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, c.stdin, args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, c.stdout, r.stdout)
			require.Contains(t, r.stderr, "Ctrl-C stops a reply")
		})
	}
	r := runCmd(t, "", "chat", "--max-tokens", "0")
	require.Equal(t, 2, r.code)
	r = runCmd(t, "", "chat", "a prompt")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "reads the conversation from stdin")
}

// interruptingWriter sends one interrupt at its first write: Ctrl-C
// pressed while the first reply streams.
type interruptingWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	intr chan<- os.Signal
	sent bool
}

func (w *interruptingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent && len(p) > 0 {
		w.sent = true
		w.intr <- os.Interrupt
	}
	return w.buf.Write(p)
}

func TestChatCtrlCStopsTheReplyNotTheChat(t *testing.T) {
	intr := make(chan os.Signal, 1)
	out := &interruptingWriter{intr: intr}
	var errb syncBuf
	// The first reply may run to the end of the context; Ctrl-C stops it.
	code := run(context.Background(), []string{"chat", "--device", "cpu", "--temperature", "0", "--max-context", "512"},
		&env{stdin: strings.NewReader("Once upon a time\n"), stdout: out, stderr: &errb, interrupts: intr})
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, errb.String(), "(reply stopped)")
	full := chatReference(t, engine.MaxTokensUntilEnd, "Once upon a time")[0]
	got := strings.TrimSuffix(out.buf.String(), "\n")
	require.NotEmpty(t, got)
	require.True(t, strings.HasPrefix(full, got), "the stopped reply is a prefix of the full one")
	require.Less(t, len(got), len(full), "the reply was stopped early")
}

// serve answers llama-server's probe with 503 while the model loads, then
// its endpoints; any model id unless --strict-model-id (here from the
// environment).
func TestServeLlamaServerHabits(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "any model id", true: "strict from the environment"}[strict], func(t *testing.T) {
			if strict {
				t.Setenv("KVWARDEN_STRICT_MODEL_ID", "true")
			}
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			get := func(url string) (int, string) {
				resp, err := client.Get(url)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b)
			}
			var whileLoading struct {
				code int
				body string
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := make(chan string, 1)
			done := make(chan int, 1)
			var errb syncBuf
			go func() {
				done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--kv-pages", "64"}, // device auto: one INFO line without a GPU
					&env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb,
						// The model loads only once this returns.
						listening: func(a string) { whileLoading.code, whileLoading.body = get("http://" + a + "/health") },
						ready:     func(a string) { addr <- a }})
			}()
			var base string
			select {
			case a := <-addr:
				base = "http://" + a
			case code := <-done:
				t.Fatalf("serve exited with %d: %s", code, errb.String())
			}
			require.Equal(t, http.StatusServiceUnavailable, whileLoading.code)
			require.JSONEq(t, `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`, whileLoading.body)
			code, body := get(base + "/health")
			require.Equal(t, http.StatusOK, code)
			require.JSONEq(t, `{"status":"ok"}`, body)
			code, body = get(base + "/props")
			require.Equal(t, http.StatusOK, code, body)
			require.Contains(t, body, `"model_path":"builtin:stories260K"`)

			resp, err := client.Post(base+"/v1/completions", "application/json",
				strings.NewReader(`{"model":"gpt-3.5-turbo","prompt":["Once upon a time","The cat"],"max_tokens":4,"temperature":0}`))
			require.NoError(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strict {
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", raw)
				require.Contains(t, string(raw), "model_not_found")
			} else {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				require.Contains(t, string(raw), `"index":1`)
			}
			cancel()
			require.Equal(t, 0, <-done, errb.String())
			require.NotContains(t, errb.String(), "searched", "no CUDA search at INFO")
		})
	}
}
