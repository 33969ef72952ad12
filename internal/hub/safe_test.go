package hub

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostileHub is a hub (or HF_ENDPOINT mirror) that lies: its file list
// names whatever it is told, and every resolve URL answers with the
// headers it is told and the body it is told, whatever the path (no
// ServeMux, so a path with ".." reaches it unchanged).
type hostileHub struct {
	names []string
	body  []byte
	// size and digest are what HEAD declares (X-Linked-Size,
	// X-Linked-Etag); "" and -1 declare nothing.
	size   int64
	digest string
	gets   atomic.Int32
}

func (h *hostileHub) start(t *testing.T) *Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/models/") {
			var sib []map[string]string
			for _, n := range h.names {
				sib = append(sib, map[string]string{"rfilename": n})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"siblings": sib})
			return
		}
		if h.size >= 0 {
			w.Header().Set("X-Linked-Size", fmt.Sprint(h.size))
		}
		if h.digest != "" {
			w.Header().Set("X-Linked-Etag", `"`+h.digest+`"`)
		}
		if r.Method == http.MethodHead {
			return // no Content-Length: only what is declared above
		}
		h.gets.Add(1)
		w.WriteHeader(http.StatusOK)
		// Write in pieces, as a server streaming a large file would.
		for b := h.body; len(b) > 0; {
			n := min(len(b), 4096)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	// The cache sits two levels down, so an escape has somewhere to land
	// inside the test's own directory.
	return &Client{Endpoint: srv.URL, CacheDir: filepath.Join(t.TempDir(), "home", "cache"), HTTP: srv.Client()}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// filesUnder lists every regular file under dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p == dir && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// A hub that lists a name climbing out of the cache must not get a file
// written there (it landed beside the cache before).
func TestPullRefusesNamesLeavingTheCache(t *testing.T) {
	data := []byte("GGUF hostile payload")
	for _, name := range []string{
		"../../../../escaped-Q4_K_M.gguf",
		"sub/../../../../../escaped-Q4_K_M.gguf",
		"/tmp/escaped-Q4_K_M.gguf",
		`..\..\..\..\escaped-Q4_K_M.gguf`,
		"./escaped-Q4_K_M.gguf",
		"a//escaped-Q4_K_M.gguf",
	} {
		t.Run(name, func(t *testing.T) {
			h := &hostileHub{names: []string{name}, body: data, size: int64(len(data)), digest: sha256Hex(data)}
			c := h.start(t)
			ref, err := ParseRef("owner/repo:Q4_K_M")
			require.NoError(t, err)
			_, err = c.Pull(t.Context(), ref)
			require.ErrorIs(t, err, ErrUnsafeName)
			require.ErrorContains(t, err, fmt.Sprintf("%q", name))
			require.Zero(t, h.gets.Load(), "nothing was downloaded")
			require.Empty(t, filesUnder(t, filepath.Dir(filepath.Dir(c.CacheDir))), "no file written anywhere")
		})
	}
}

// A Ref built by hand (not by ParseRef) is checked too, before the network.
func TestPullRefusesUnsafeRef(t *testing.T) {
	h := &hostileHub{body: []byte("x"), size: 1, digest: sha256Hex([]byte("x"))}
	c := h.start(t)
	for _, ref := range []Ref{
		{Repo: "owner/repo", Revision: "main", File: "../../x.gguf"},
		{Repo: "../..", Revision: "main", File: "x.gguf"},
		{Repo: "owner/repo/..", Revision: "main", File: "x.gguf"},
	} {
		_, err := c.Pull(t.Context(), ref)
		require.ErrorIs(t, err, ErrUnsafeName, "%+v", ref)
		_, err = c.Cached(ref)
		require.ErrorIs(t, err, ErrUnsafeName, "%+v", ref)
	}
	require.Zero(t, h.gets.Load())
}

// Writes go through an os.Root of the cache: a symlink inside the cache
// that leads out of it is not followed.
func TestPullDoesNotFollowSymlinksOutOfTheCache(t *testing.T) {
	data := []byte("GGUF model bytes")
	h := &hostileHub{names: []string{"m.gguf"}, body: data, size: int64(len(data)), digest: sha256Hex(data)}
	c := h.start(t)
	outside := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(c.CacheDir, "models"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(c.CacheDir, "models", "owner")))
	ref, _ := ParseRef("owner/repo:m.gguf")
	_, err := c.Pull(t.Context(), ref)
	require.Error(t, err)
	require.Empty(t, filesUnder(t, outside))
}

// The download stops at the declared size: a server that sends more gets
// an error, and no more than the declared bytes ever reach the disk.
func TestPullStopsAtDeclaredSize(t *testing.T) {
	declared := []byte("GGUF 16 bytes!!!")
	h := &hostileHub{names: []string{"m.gguf"}, body: append(bytes.Clone(declared), make([]byte, 1<<20)...),
		size: int64(len(declared)), digest: sha256Hex(declared)}
	c := h.start(t)
	var most int64
	c.ProgressEvery = time.Nanosecond
	c.Progress = func(p Progress) { most = max(most, p.Done) }
	ref, _ := ParseRef("owner/repo:m.gguf")
	_, err := c.Pull(t.Context(), ref)
	require.ErrorIs(t, err, ErrVerify)
	require.ErrorContains(t, err, "more than the 16 bytes")
	require.LessOrEqual(t, most, int64(len(declared)), "bytes written past the declared size")
	require.Empty(t, filesUnder(t, filepath.Join(c.CacheDir, "models")))
	requireNoPartials(t, c)
}

// A file with no declared size or no digest cannot be verified: refused
// unless the caller opts in.
func TestPullRefusesUnverifiableFiles(t *testing.T) {
	data := []byte("GGUF unverifiable")
	cases := []struct {
		name   string
		size   int64
		digest string
	}{
		{"neither", -1, ""},
		{"no digest", int64(len(data)), ""},
		{"no size", -1, sha256Hex(data)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &hostileHub{names: []string{"m.gguf"}, body: data, size: tc.size, digest: tc.digest}
			c := h.start(t)
			ref, _ := ParseRef("owner/repo:m.gguf")
			_, err := c.Pull(t.Context(), ref)
			require.ErrorIs(t, err, ErrUnverifiable)
			require.ErrorContains(t, err, "--allow-unverified")
			require.Zero(t, h.gets.Load())
			require.Empty(t, filesUnder(t, filepath.Dir(c.CacheDir)))

			c.AllowUnverified = true
			m, err := c.Pull(t.Context(), ref)
			require.NoError(t, err)
			got, err := os.ReadFile(m.Path)
			require.NoError(t, err)
			require.Equal(t, data, got)
		})
	}
}

// A cached file whose bytes changed since it was verified is noticed on
// the next pull and downloaded again.
func TestPullReverifiesCachedFile(t *testing.T) {
	h := newFakeHub(t)
	data := blob(50_000, 9)
	h.add("owner/repo", "m.gguf", data, true)
	c := h.client(t)
	ref, _ := ParseRef("owner/repo:m.gguf")
	m, err := c.Pull(t.Context(), ref)
	require.NoError(t, err)

	// Unchanged: answered from the cache.
	n := len(h.ranges)
	_, err = c.Pull(t.Context(), ref)
	require.NoError(t, err)
	require.Len(t, h.ranges, n, "an intact file is not downloaded again")

	f, err := os.OpenFile(m.Path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{data[1234] ^ 0x01}, 1234)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	m2, err := c.Pull(t.Context(), ref)
	require.NoError(t, err)
	require.Len(t, h.ranges, n+1, "the corrupted file is downloaded again")
	got, err := os.ReadFile(m2.Path)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Equal(t, sha256Hex(data), m2.SHA256)
}
