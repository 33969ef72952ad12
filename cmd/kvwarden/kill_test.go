package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveBinary is a `kvwarden serve` process: what kill -9 needs.
type serveBinary struct {
	cmd  *exec.Cmd
	proc *serveProc
	wait chan error
}

var addrRE = regexp.MustCompile(`msg=listening addr=(http://[0-9.:]+)`)

func startBinary(t *testing.T, bin string, args ...string) *serveBinary {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--device", "cpu"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := &serveBinary{cmd: cmd, wait: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
		b.wait <- cmd.Wait()
	}()
	base, ok := <-addr
	require.True(t, ok, "serve exited before listening")
	b.proc = &serveProc{base: base, client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{}}}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	// serve binds before it loads the model: wait for ready (bounded).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := b.proc.client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
		}
		require.True(t, time.Now().Before(deadline), "serve never became ready")
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// TestServeKill9 (issue 27): `kvwarden serve` with the disk tier, killed
// with SIGKILL in the middle of a load, restarts healthy on the same
// directory (the lock died with the process, crash leftovers are cleaned or
// fail their tag) and answers exactly what it answered before.
func TestServeKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvwarden binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kvwarden")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	keys := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(keys, []byte("sk-alice-0123456789 alice\n"), 0o600))
	key := filepath.Join(dir, "kv.key")
	require.NoError(t, os.WriteFile(key, []byte(strings.Repeat("5c", 32)), 0o600))
	flags := []string{"--api-keys", keys, "--kv-pages", "48", "--host-offload", "256KiB",
		"--kv-disk", filepath.Join(dir, "kv"), "--kv-disk-budget", "2MiB", "--kv-key-file", key}
	const alice = "sk-alice-0123456789"

	s := startBinary(t, bin, flags...)
	want, _ := s.proc.complete(t, alice)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, <-s.wait, "graceful stop")

	// Under load: distinct long prompts (so pages spill to the host tier
	// and on to disk), killed once the first answers.
	s = startBinary(t, bin, flags...)
	var wg sync.WaitGroup
	first := make(chan struct{})
	var once sync.Once
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt":"Request %d: once upon a time, in a land far away, there lived a dragon who loved to read books about the sea.","max_tokens":24,"temperature":0}`, i)
			req, _ := http.NewRequest(http.MethodPost, s.proc.base+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+alice)
			if resp, err := s.proc.client.Do(req); err == nil {
				resp.Body.Close()
			}
			once.Do(func() { close(first) })
		}()
	}
	<-first
	require.NoError(t, s.cmd.Process.Kill())
	<-s.wait
	wg.Wait()

	s = startBinary(t, bin, flags...)
	text, _ := s.proc.complete(t, alice)
	require.Equal(t, want, text, "the same answer after kill -9 and restart")
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, <-s.wait)
}
