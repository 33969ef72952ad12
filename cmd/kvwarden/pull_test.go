package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testenv"
)

// testHub serves one repository the way the Hugging Face hub does: a file
// list, and resolve URLs that redirect to a CDN with X-Linked-Size and
// X-Linked-Etag.
func testHub(t *testing.T, repo string, files map[string][]byte) *httptest.Server {
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /api/models/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/models/"+repo+"/") {
			http.NotFound(w, r)
			return
		}
		var sib []map[string]string
		for name := range files {
			sib = append(sib, map[string]string{"rfilename": name})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"siblings": sib})
	})
	mux.HandleFunc("/cdn/", func(w http.ResponseWriter, r *http.Request) {
		data := files[strings.TrimPrefix(r.URL.Path, "/cdn/")]
		http.ServeContent(w, r, "blob", time.Time{}, bytes.NewReader(data))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/"+repo+"/resolve/main/")
		data, found := files[name]
		if !ok || !found {
			w.Header().Set("X-Error-Code", "RepoNotFound")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		sum := sha256.Sum256(data)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
		http.Redirect(w, r, srv.URL+"/cdn/"+name, http.StatusFound)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestPullModelsAndGenerate(t *testing.T) {
	gguf, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	hubSrv := testHub(t, "someone/stories-GGUF", map[string][]byte{
		"stories260K-F32.gguf": gguf, "stories260K-Q8_0.gguf": gguf[:1000], "README.md": []byte("hi"),
	})
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", hubSrv.URL)
	t.Setenv("KVWARDEN_CACHE_DIR", cache)
	t.Setenv("HF_TOKEN", "")

	r := runCmd(t, "", "pull", "someone/stories-GGUF:f32")
	require.Equal(t, 0, r.code, r.stderr)
	want := filepath.Join(cache, "models", "someone", "stories-GGUF", "stories260K-F32.gguf")
	require.Equal(t, want+"\n", r.stdout)
	require.Contains(t, r.stderr, "stories260K-F32.gguf: 1.13MiB") // plain lines: not a terminal
	require.Contains(t, r.stderr, "done")
	sum := sha256.Sum256(gguf)
	require.Contains(t, r.stderr, hex.EncodeToString(sum[:]))
	got, err := os.ReadFile(want)
	require.NoError(t, err)
	require.Equal(t, gguf, got)

	r = runCmd(t, "", "models")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "someone/stories-GGUF:stories260K-F32.gguf")
	require.Contains(t, r.stdout, want)
	r = runCmd(t, "", "models", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, hex.EncodeToString(sum[:]), rows[0]["sha256"])

	// --model takes the reference; the cache answers without the hub.
	hubSrv.Close()
	r = runCmd(t, "", "generate", "--model", "someone/stories-GGUF:F32", "--max-context", "512", "--temperature", "0", "-n", "12", "--no-echo", "Once upon a time")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, ", there was a little girl named Lily. She\n", r.stdout)
}

func TestPullErrorsCLI(t *testing.T) {
	hubSrv := testHub(t, "someone/repo", map[string][]byte{"m-Q4_K_M.gguf": []byte("GGUF")})
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", hubSrv.URL)
	t.Setenv("KVWARDEN_CACHE_DIR", cache)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"pull"}, 2, "want one model reference"},
		{[]string{"pull", "not a ref"}, 2, "bad model reference"},
		{[]string{"pull", "someone/other:Q4_K_M"}, 1, "not found"},
		{[]string{"pull", "someone/repo:gone.gguf"}, 1, "HF_TOKEN"},
		{[]string{"pull", "someone/repo:Q2_K"}, 1, "m-Q4_K_M.gguf"},
		{[]string{"generate", "--model", "someone/repo:Q2_K", "hi"}, 1, "no GGUF for tag"},
	}
	for _, c := range cases {
		r := runCmd(t, "", c.args...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, "%v", c.args)
		require.Empty(t, r.stdout)
	}
	entries, _ := os.ReadDir(filepath.Join(cache, "models"))
	require.Empty(t, entries, "nothing written to the cache")
}
