package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mirror that publishes no digest: pull refuses the file unless
// --allow-unverified says to take it anyway.
func TestPullAllowUnverifiedCLI(t *testing.T) {
	data := []byte("GGUF no digest")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			fmt.Fprint(w, `{"siblings":[{"rfilename":"m-Q4_K_M.gguf"}]}`)
			return
		}
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("KVWARDEN_CACHE_DIR", cache)
	t.Setenv("HF_TOKEN", "")

	r := runCmd(t, "", "pull", "someone/repo:Q4_K_M")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "--allow-unverified")
	require.Empty(t, r.stdout)

	r = runCmd(t, "", "pull", "--allow-unverified", "someone/repo:Q4_K_M")
	require.Equal(t, 0, r.code, r.stderr)
	want := filepath.Join(cache, "models", "someone", "repo", "m-Q4_K_M.gguf")
	require.Equal(t, want+"\n", r.stdout)
	got, err := os.ReadFile(want)
	require.NoError(t, err)
	require.Equal(t, data, got)
}
