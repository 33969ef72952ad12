package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeHub behaves like the Hugging Face hub's resolve endpoint: LFS files
// answer HEAD/GET with a 302 to a CDN path and X-Linked-Size /
// X-Linked-Etag (the SHA-256) / X-Repo-Commit; small files answer 200 with
// the git blob id as ETag; the CDN honours Range. It can cut a transfer
// after a number of bytes, lie about a digest, demand a token, and
// redirect a renamed repository.
type fakeHub struct {
	t      *testing.T
	srv    *httptest.Server
	cdnSrv *httptest.Server
	files  map[string][]byte // "owner/repo/file" -> content
	lfs    map[string]bool   // stored via LFS (redirect to the CDN)

	mu          sync.Mutex
	cutAfter    int64             // >0: the CDN drops the connection after this many bytes (once)
	badSHA      bool              // publish a wrong SHA-256
	ignoreRange bool              // the CDN answers 200 to a Range request
	ranges      []string          // Range headers the CDN saw
	cdnAuth     []string          // Authorization headers the CDN saw
	gated       map[string]string // repo -> the token that may read it
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, files: map[string][]byte{}, lfs: map[string]bool{}, gated: map[string]string{}}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/models/{owner}/{repo}/revision/{rev}", h.api)
	files := http.NewServeMux()
	files.HandleFunc("/{owner}/{repo}/resolve/{rev}/{file...}", h.resolve)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			api.ServeHTTP(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	// The CDN is another host, as the hub's is.
	cdn := http.NewServeMux()
	cdn.HandleFunc("/cdn/{key...}", h.cdn)
	h.cdnSrv = httptest.NewServer(cdn)
	t.Cleanup(h.cdnSrv.Close)
	return h
}

func (h *fakeHub) add(repo, file string, data []byte, lfs bool) {
	h.files[repo+"/"+file] = data
	h.lfs[repo+"/"+file] = lfs
}

func (h *fakeHub) client(t *testing.T) *Client {
	return &Client{Endpoint: h.srv.URL, CacheDir: t.TempDir(), HTTP: h.srv.Client()}
}

func (h *fakeHub) authorized(w http.ResponseWriter, r *http.Request, repo string) bool {
	tok, gated := h.gated[repo]
	if !gated {
		return true
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case got == "":
		w.Header().Set("X-Error-Message", "Access to model "+repo+" is restricted.")
		w.WriteHeader(http.StatusUnauthorized)
		return false
	case got != tok:
		w.WriteHeader(http.StatusForbidden)
		return false
	}
	return true
}

func (h *fakeHub) api(w http.ResponseWriter, r *http.Request) {
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	if !h.authorized(w, r, repo) {
		return
	}
	var sib []map[string]string
	for k := range h.files {
		if f, ok := strings.CutPrefix(k, repo+"/"); ok {
			sib = append(sib, map[string]string{"rfilename": f})
		}
	}
	if len(sib) == 0 {
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": repo, "siblings": sib})
}

func (h *fakeHub) resolve(w http.ResponseWriter, r *http.Request) {
	owner, repo, file := r.PathValue("owner"), r.PathValue("repo"), r.PathValue("file")
	if owner == "old" { // a renamed repository
		http.Redirect(w, r, "/new/"+repo+"/resolve/"+r.PathValue("rev")+"/"+file, http.StatusTemporaryRedirect)
		return
	}
	key := owner + "/" + repo + "/" + file
	if !h.authorized(w, r, owner+"/"+repo) {
		return
	}
	data, ok := h.files[key]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
	if h.lfs[key] {
		sum := sha256.Sum256(data)
		digest := hex.EncodeToString(sum[:])
		h.mu.Lock()
		if h.badSHA {
			digest = strings.Repeat("0", 64)
		}
		h.mu.Unlock()
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		w.Header().Set("X-Linked-Etag", `"`+digest+`"`)
		w.Header().Set("ETag", `W/"not-the-digest"`)
		http.Redirect(w, r, h.cdnSrv.URL+"/cdn/"+key+"?X-Amz-Signature=secret", http.StatusFound)
		return
	}
	blob := sha1.New()
	fmt.Fprintf(blob, "blob %d\x00", len(data))
	blob.Write(data)
	w.Header().Set("ETag", fmt.Sprintf(`"%x"`, blob.Sum(nil)))
	http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(data))
}

func (h *fakeHub) cdn(w http.ResponseWriter, r *http.Request) {
	data := h.files[r.PathValue("key")]
	h.mu.Lock()
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	h.cdnAuth = append(h.cdnAuth, r.Header.Get("Authorization"))
	cut := h.cutAfter
	h.cutAfter = 0
	if h.ignoreRange {
		r.Header.Del("Range")
	}
	h.mu.Unlock()
	if cut > 0 {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data[:cut])
		w.(http.Flusher).Flush()
		// Drop the connection mid-body, as a network failure would.
		conn, _, err := http.NewResponseController(w).Hijack()
		require.NoError(h.t, err)
		conn.Close()
		return
	}
	http.ServeContent(w, r, "blob", time.Time{}, bytes.NewReader(data))
}

func blob(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestParseRef(t *testing.T) {
	cases := []struct {
		in   string
		want Ref
	}{
		{"bartowski/Llama-3.2-1B-Instruct-GGUF", Ref{Repo: "bartowski/Llama-3.2-1B-Instruct-GGUF", Revision: "main"}},
		{"owner/repo:Q4_K_M", Ref{Repo: "owner/repo", Revision: "main", Tag: "Q4_K_M"}},
		{"owner/repo:q8_0@v1.0", Ref{Repo: "owner/repo", Revision: "v1.0", Tag: "q8_0"}},
		{"owner/repo:model-Q4_K_M.gguf", Ref{Repo: "owner/repo", Revision: "main", File: "model-Q4_K_M.gguf"}},
		{"owner/repo:sub/dir/m.gguf@abc123", Ref{Repo: "owner/repo", Revision: "abc123", File: "sub/dir/m.gguf"}},
		{"hf://owner/repo/m.gguf", Ref{Repo: "owner/repo", Revision: "main", File: "m.gguf"}},
		{"hf://owner/repo@dev/sub/m.gguf", Ref{Repo: "owner/repo", Revision: "dev", File: "sub/m.gguf"}},
		{"hf://owner/repo", Ref{Repo: "owner/repo", Revision: "main"}},
		{"https://huggingface.co/owner/repo/resolve/main/m.gguf", Ref{Repo: "owner/repo", Revision: "main", File: "m.gguf"}},
		{"https://huggingface.co/owner/repo/blob/v2/a/m.gguf", Ref{Repo: "owner/repo", Revision: "v2", File: "a/m.gguf"}},
	}
	for _, c := range cases {
		got, err := ParseRef(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
		again, err := ParseRef(got.String())
		require.NoError(t, err)
		require.Equal(t, got, again, "String round-trips")
	}
	for _, bad := range []string{"", "norepo", "a/b/c", "owner/repo:../x.gguf", "owner/repo:/abs.gguf", "hf://owner", "owner/repo:bad tag", "-x/y"} {
		_, err := ParseRef(bad)
		require.ErrorIs(t, err, ErrBadRef, bad)
	}
	for s, want := range map[string]bool{
		"owner/repo": true, "owner/repo:Q4_K_M": true, "hf://a/b/c.gguf": true,
		"models/x.gguf": false, "./a/b": false, "/abs/model.gguf": false, "model.gguf": false, "dir/tok.bin": false,
	} {
		require.Equal(t, want, LooksLikeRef(s), s)
	}
}

func TestPickFile(t *testing.T) {
	names := []string{"README.md", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m.Q8_0.gguf", "mmproj-m-f16.gguf", "big-Q6_K-00001-of-00002.gguf", "big-Q6_K-00002-of-00002.gguf"}
	for tag, want := range map[string]string{"": "m-Q4_K_M.gguf", "q4_k_m": "m-Q4_K_M.gguf", "Q8_0": "m.Q8_0.gguf", "Q4_K_S": "m-Q4_K_S.gguf"} {
		got, err := pickFile(Ref{Repo: "o/r", Tag: tag}, names)
		require.NoError(t, err, tag)
		require.Equal(t, want, got, tag)
	}
	_, err := pickFile(Ref{Repo: "o/r", Tag: "Q2_K"}, names)
	require.ErrorIs(t, err, ErrNoMatch)
	require.ErrorContains(t, err, "m-Q4_K_M.gguf", "the error lists what there is")
	_, err = pickFile(Ref{Repo: "o/r", Tag: "f16"}, names)
	require.ErrorIs(t, err, ErrNoMatch, "mmproj files are never picked")
	_, err = pickFile(Ref{Repo: "o/r", Tag: "Q6_K-00001-of-00002"}, names)
	require.ErrorContains(t, err, "split GGUF")
	got, err := pickFile(Ref{Repo: "o/r"}, []string{"b-f16.gguf", "a-Q8_0.gguf"})
	require.NoError(t, err)
	require.Equal(t, "a-Q8_0.gguf", got, "no Q4_K_M: the first GGUF")
	_, err = pickFile(Ref{Repo: "o/r"}, []string{"config.json"})
	require.ErrorIs(t, err, ErrNoMatch)
}

func TestPullVerifiesAndCaches(t *testing.T) {
	h := newFakeHub(t)
	data := blob(300_000, 1)
	h.add("owner/repo", "model-Q4_K_M.gguf", data, true)
	h.add("owner/repo", "model-Q8_0.gguf", blob(1000, 2), true)
	small := blob(5000, 3)
	h.add("owner/repo", "sub/small.gguf", small, false)
	c := h.client(t)
	var reports []Progress
	c.Progress = func(p Progress) { reports = append(reports, p) }

	ref, err := ParseRef("owner/repo:q4_k_m")
	require.NoError(t, err)
	m, err := c.Pull(t.Context(), ref)
	require.NoError(t, err)
	got, err := os.ReadFile(m.Path)
	require.NoError(t, err)
	require.Equal(t, data, got)
	sum := sha256.Sum256(data)
	require.Equal(t, hex.EncodeToString(sum[:]), m.SHA256)
	require.Equal(t, int64(len(data)), m.Size)
	require.Equal(t, filepath.Join(c.CacheDir, "models", "owner", "repo", "model-Q4_K_M.gguf"), m.Path)
	require.Equal(t, "0123456789abcdef0123456789abcdef01234567", m.Commit)
	require.NotEmpty(t, reports)
	last := reports[len(reports)-1]
	require.True(t, last.Final)
	require.Equal(t, int64(len(data)), last.Done)
	require.Equal(t, int64(len(data)), last.Total)
	for _, a := range h.cdnAuth {
		require.Empty(t, a)
	}

	// The cache answers without the hub, for the tag and for the file.
	for _, s := range []string{"owner/repo:Q4_K_M", "owner/repo", "owner/repo:model-Q4_K_M.gguf"} {
		r, _ := ParseRef(s)
		cm, err := c.Cached(r)
		require.NoError(t, err, s)
		require.Equal(t, m.Path, cm.Path)
	}
	// Pulling again downloads nothing.
	n := len(h.ranges)
	_, err = c.Pull(t.Context(), ref)
	require.NoError(t, err)
	require.Len(t, h.ranges, n)

	// A non-LFS file: verified by its git blob id.
	r, _ := ParseRef("hf://owner/repo/sub/small.gguf")
	sm, err := c.Pull(t.Context(), r)
	require.NoError(t, err)
	require.NotEmpty(t, sm.GitSHA1)
	got, _ = os.ReadFile(sm.Path)
	require.Equal(t, small, got)

	list, err := c.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "owner/repo:model-Q4_K_M.gguf", list[0].Ref().String())
	require.Equal(t, "owner/repo:sub/small.gguf", list[1].Ref().String())
	requireNoPartials(t, c)
}

func TestPullResumesWithRange(t *testing.T) {
	h := newFakeHub(t)
	data := blob(200_000, 4)
	h.add("owner/repo", "m.gguf", data, true)
	c := h.client(t)
	ref, _ := ParseRef("owner/repo:m.gguf")

	h.cutAfter = 70_000
	_, err := c.Pull(t.Context(), ref)
	require.ErrorIs(t, err, ErrNetwork)
	require.ErrorContains(t, err, "pull again to resume")
	_, statErr := os.Stat(c.modelPath("owner/repo", "m.gguf"))
	require.ErrorIs(t, statErr, fs.ErrNotExist, "nothing half-written in models/")
	parts, err := c.Partials()
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, int64(70_000), parts[0].Bytes)
	_, err = c.Cached(ref)
	require.ErrorIs(t, err, ErrNotCached)

	var first Progress
	c.Progress = func(p Progress) {
		if first.Started.IsZero() {
			first = p
		}
	}
	m, err := c.Pull(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, "bytes=70000-", h.ranges[len(h.ranges)-1])
	require.Equal(t, int64(70_000), first.Resumed)
	got, _ := os.ReadFile(m.Path)
	require.Equal(t, data, got)
	requireNoPartials(t, c)

	// A server that ignores Range: the download starts over, still right.
	require.NoError(t, os.Remove(m.Path))
	require.NoError(t, os.Remove(m.Path+metaSuffix))
	h.cutAfter, h.ignoreRange = 50_000, false
	_, err = c.Pull(t.Context(), ref)
	require.ErrorIs(t, err, ErrNetwork)
	h.ignoreRange = true
	m, err = c.Pull(t.Context(), ref)
	require.NoError(t, err)
	got, _ = os.ReadFile(m.Path)
	require.Equal(t, data, got)
}

func TestPullRejectsWrongDigest(t *testing.T) {
	h := newFakeHub(t)
	h.add("owner/repo", "m.gguf", blob(10_000, 5), true)
	h.badSHA = true
	c := h.client(t)
	ref, _ := ParseRef("owner/repo:m.gguf")
	_, err := c.Pull(t.Context(), ref)
	require.ErrorIs(t, err, ErrVerify)
	require.ErrorContains(t, err, "SHA-256")
	requireEmptyModels(t, c)
	requireNoPartials(t, c)
}

func TestPullErrors(t *testing.T) {
	h := newFakeHub(t)
	h.add("gated/model", "m.gguf", blob(100, 6), true)
	h.gated["gated/model"] = "hf_good"
	h.add("new/name", "m.gguf", blob(2000, 7), true)
	c := h.client(t)
	pull := func(s string) error {
		r, err := ParseRef(s)
		require.NoError(t, err)
		_, err = c.Pull(t.Context(), r)
		return err
	}
	err := pull("gated/model:m.gguf")
	require.ErrorIs(t, err, ErrUnauthorized)
	require.ErrorContains(t, err, "HF_TOKEN")
	require.ErrorContains(t, err, "is restricted", "the hub's own message is shown")
	c.Token = "hf_wrong"
	require.ErrorIs(t, pull("gated/model:m.gguf"), ErrForbidden)
	c.Token = "hf_good"
	require.NoError(t, pull("gated/model:m.gguf"))
	for _, a := range h.cdnAuth {
		require.Empty(t, a, "the token never goes to the CDN")
	}
	require.ErrorIs(t, pull("gated/model:other.gguf"), ErrNotFound)
	require.ErrorIs(t, pull("nobody/nothing:Q4_K_M"), ErrNotFound)
	require.ErrorIs(t, pull("gated/model:Q2_K"), ErrNoMatch)
	// A renamed repository: the hub redirects within itself.
	require.NoError(t, pull("old/name:m.gguf"))

	// Network failure: a closed port.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	c2 := &Client{Endpoint: url, CacheDir: t.TempDir()}
	r, _ := ParseRef("owner/repo:m.gguf")
	_, err = c2.Pull(t.Context(), r)
	require.ErrorIs(t, err, ErrNetwork)
	requireEmptyModels(t, c2)
	requireNoPartials(t, c2)

	// Cancellation mid-download keeps the bytes for a resume.
	h.add("owner/repo", "m.gguf", blob(100_000, 8), true)
	ctx, cancel := context.WithCancel(t.Context())
	c.ProgressEvery = time.Nanosecond // report every write
	c.Progress = func(p Progress) {
		if p.Done > 0 {
			cancel()
		}
	}
	h.cutAfter = 0
	_, err = c.Pull(ctx, r)
	require.ErrorIs(t, err, context.Canceled)
	requireEmptyModelsFor(t, c, "owner/repo", "m.gguf")
}

func requireNoPartials(t *testing.T, c *Client) {
	t.Helper()
	parts, err := c.Partials()
	require.NoError(t, err)
	require.Empty(t, parts)
}

func requireEmptyModels(t *testing.T, c *Client) {
	t.Helper()
	list, err := c.List()
	require.NoError(t, err)
	require.Empty(t, list)
	_ = filepath.WalkDir(filepath.Join(c.CacheDir, "models"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file left in models/: %s", p)
		}
		return nil
	})
}

func requireEmptyModelsFor(t *testing.T, c *Client, repo, file string) {
	t.Helper()
	_, err := os.Stat(c.modelPath(repo, file))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("KVWARDEN_CACHE_DIR", "/tmp/kvw-cache")
	d, err := DefaultCacheDir()
	require.NoError(t, err)
	require.Equal(t, "/tmp/kvw-cache", d)
	t.Setenv("KVWARDEN_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg")
	d, err = DefaultCacheDir()
	require.NoError(t, err)
	require.Equal(t, "/tmp/xdg/kvwarden", d)

	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1/")
	t.Setenv("HF_TOKEN", " hf_abc ")
	c, err := New("")
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1", c.Endpoint)
	require.Equal(t, "hf_abc", c.Token)
	require.Equal(t, "/tmp/xdg/kvwarden", c.CacheDir)
}
