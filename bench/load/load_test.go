package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serve builds kvwarden, starts `kvwarden serve` on a free loopback port
// with args, and stops it with SIGTERM at cleanup (which must exit 0). It
// returns once the model is loaded ("ready"): serve listens before loading
// and answers 503 "Loading model" until then, which a load run would count.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvwarden")
	build := exec.Command("go", "build", "-o", bin, "github.com/kvwarden/kvwarden/cmd/kvwarden")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "info"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		re := regexp.MustCompile(`msg=listening addr=(http://\S+)`)
		var listening string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if testing.Verbose() {
				t.Log(sc.Text())
			}
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening = m[1]
			}
			if listening != "" && regexp.MustCompile(`msg=ready\b`).MatchString(sc.Text()) {
				addr <- listening
				listening = ""
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { <-logDone; done <- cmd.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "kvwarden serve must exit 0 after SIGTERM")
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("kvwarden serve did not stop after SIGTERM")
		}
	})
	select {
	case a := <-addr:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("kvwarden serve did not start")
	}
	return ""
}

func TestLoadBelowSaturation(t *testing.T) {
	url := serve(t, "--kv-pages", "128", "--max-context", "256")
	for _, stream := range []bool{false, true} {
		rep, err := Run(context.Background(), Config{URL: url, Prompt: "Once upon a time", MaxTokens: 8, Clients: 2, Duration: 2 * time.Second, Stream: stream})
		require.NoError(t, err)
		t.Log(rep)
		require.Zero(t, rep.Errors, "%v", rep.FirstErrors)
		require.Zero(t, rep.Overloaded)
		require.Positive(t, rep.OK)
		require.Positive(t, rep.TokensPerS)
		if stream {
			require.Positive(t, rep.TTFTP50ms)
			require.LessOrEqual(t, rep.TTFTP50ms, rep.P50ms, "the first token comes before the end")
		}
	}
}

func TestLoadAboveSaturation(t *testing.T) {
	url := serve(t, "--kv-pages", "128", "--max-context", "256", "--max-seqs", "1", "--max-queue", "1")
	rep, err := Run(context.Background(), Config{URL: url, Prompt: "Once upon a time", MaxTokens: 8, Clients: 12, Duration: 2 * time.Second})
	require.NoError(t, err)
	t.Log(rep)
	require.Zero(t, rep.Errors, "overload must give clean 429s, not errors: %v", rep.FirstErrors)
	require.Positive(t, rep.Overloaded, "a queue of 1 with 12 clients must overload")
	require.Positive(t, rep.OK)
}
