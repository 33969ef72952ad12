package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Errors of Pull and Resolve, wrapped with the details.
var (
	ErrUnauthorized = errors.New("hub: unauthorized (401)")
	ErrForbidden    = errors.New("hub: access denied (403)")
	ErrNotFound     = errors.New("hub: not found (404)")
	ErrHTTP         = errors.New("hub: unexpected HTTP status")
	ErrNetwork      = errors.New("hub: network error")
	ErrVerify       = errors.New("hub: download failed verification")
	ErrNoMatch      = errors.New("hub: no GGUF file matches")
	ErrNotCached    = errors.New("hub: not in the cache")
)

// DefaultEndpoint is the Hugging Face hub.
const DefaultEndpoint = "https://huggingface.co"

// Client pulls models into CacheDir. The zero value is not usable; build
// one with New or set every field.
type Client struct {
	Endpoint string       // hub base URL, no trailing slash
	Token    string       // bearer token for gated or private repositories ("" = none)
	CacheDir string       // root of the cache
	HTTP     *http.Client // nil: a client with sane timeouts
	// Progress, when set, is called as bytes arrive (at most every
	// ProgressEvery, and once at the end).
	Progress      func(Progress)
	ProgressEvery time.Duration
	// AllowUnverified downloads a file the hub gives no size or no digest
	// for (ErrUnverifiable otherwise): its length is then unbounded, or
	// its content unchecked.
	AllowUnverified bool
}

// Progress reports a download.
type Progress struct {
	File    string
	Done    int64 // bytes on disk, including resumed ones
	Total   int64 // expected size; 0 when unknown
	Resumed int64 // bytes kept from an earlier, interrupted download
	Started time.Time
	Final   bool
}

// New builds a client from the environment: HF_ENDPOINT (default
// DefaultEndpoint), HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), and the cache
// dir cacheDir, or DefaultCacheDir when empty.
func New(cacheDir string) (*Client, error) {
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	ep := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/")
	if ep == "" {
		ep = DefaultEndpoint
	}
	tok := os.Getenv("HF_TOKEN")
	if tok == "" {
		tok = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	return &Client{Endpoint: ep, Token: strings.TrimSpace(tok), CacheDir: cacheDir}, nil
}

// DefaultCacheDir is $KVWARDEN_CACHE_DIR, else $XDG_CACHE_HOME/kvwarden
// (~/.cache/kvwarden on Linux; the platform's user cache dir elsewhere).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("KVWARDEN_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hub: no cache directory (set KVWARDEN_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "kvwarden"), nil
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}}
}

// Model is a file in the cache.
type Model struct {
	Repo     string    `json:"repo"`
	Revision string    `json:"revision"`
	File     string    `json:"file"`
	Commit   string    `json:"commit,omitempty"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256,omitempty"`
	GitSHA1  string    `json:"git_sha1,omitempty"`
	Pulled   time.Time `json:"pulled"`
	Path     string    `json:"-"`
}

// Ref is the model's reference.
func (m Model) Ref() Ref { return Ref{Repo: m.Repo, Revision: m.Revision, File: m.File} }

const metaSuffix = ".kvwarden.json"

func (c *Client) modelPath(repo, file string) string {
	return filepath.Join(c.CacheDir, "models", filepath.FromSlash(repo), filepath.FromSlash(file))
}

// Cached finds ref in the cache without the network. A tag reference
// matches the cached files of its repository as Resolve would match the
// repository's files.
func (c *Client) Cached(ref Ref) (Model, error) {
	if ref.File == "" {
		ms, err := c.List()
		if err != nil {
			return Model{}, err
		}
		var names []string
		byName := map[string]Model{}
		for _, m := range ms {
			if m.Repo == ref.Repo && (m.Revision == ref.Revision || ref.Revision == "main") {
				names = append(names, m.File)
				byName[m.File] = m
			}
		}
		f, err := pickFile(ref, names)
		if err != nil {
			return Model{}, fmt.Errorf("%w: %s", ErrNotCached, ref)
		}
		return byName[f], nil
	}
	if err := checkRef(ref); err != nil {
		return Model{}, err
	}
	p := c.modelPath(ref.Repo, ref.File)
	m, err := readMeta(p)
	if err != nil {
		return Model{}, fmt.Errorf("%w: %s", ErrNotCached, ref)
	}
	if ref.Revision != "main" && m.Revision != ref.Revision && m.Commit != ref.Revision {
		return Model{}, fmt.Errorf("%w: %s (cached at revision %s)", ErrNotCached, ref, m.Revision)
	}
	return m, nil
}

func readMeta(modelPath string) (Model, error) {
	b, err := os.ReadFile(modelPath + metaSuffix)
	if err != nil {
		return Model{}, err
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return Model{}, fmt.Errorf("%s%s: %w", modelPath, metaSuffix, err)
	}
	st, err := os.Stat(modelPath)
	if err != nil {
		return Model{}, err
	}
	if st.Size() != m.Size {
		return Model{}, fmt.Errorf("%s: %d bytes, its record says %d", modelPath, st.Size(), m.Size)
	}
	m.Path = modelPath
	return m, nil
}

// List returns the cached models, sorted by reference.
func (c *Client) List() ([]Model, error) {
	root := filepath.Join(c.CacheDir, "models")
	var out []Model
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, metaSuffix) {
			return nil
		}
		m, err := readMeta(strings.TrimSuffix(p, metaSuffix))
		if err != nil {
			return nil // a record without its file is not a model
		}
		out = append(out, m)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref().String() < out[j].Ref().String() })
	return out, nil
}

// Partial is an interrupted download kept for resuming.
type Partial struct {
	Path  string
	Bytes int64
}

// Partials lists interrupted downloads.
func (c *Client) Partials() ([]Partial, error) {
	var out []Partial
	root := filepath.Join(c.CacheDir, "downloads")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".partial") {
			if info, err := d.Info(); err == nil {
				out = append(out, Partial{Path: p, Bytes: info.Size()})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return out, nil
}

// Resolve fills in ref.File for a tag reference from the repository's
// file list.
func (c *Client) Resolve(ctx context.Context, ref Ref) (Ref, error) {
	if ref.File != "" {
		return ref, nil
	}
	names, err := c.Files(ctx, ref)
	if err != nil {
		return ref, err
	}
	f, err := pickFile(ref, names)
	if err != nil {
		return ref, err
	}
	// The name comes from the hub: it must stay inside the cache.
	if err := checkName("file", f); err != nil {
		return ref, fmt.Errorf("%w (listed by %s)", err, redact(c.filesURL(ref)))
	}
	ref.File, ref.Tag = f, ""
	return ref, nil
}

// Files lists the files of ref's repository at ref.Revision.
func (c *Client) Files(ctx context.Context, ref Ref) ([]string, error) {
	u := c.filesURL(ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, networkError(err, u)
	}
	defer resp.Body.Close()
	if err := statusError(resp, ref, ""); err != nil {
		return nil, err
	}
	var info struct {
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("%w: %s: reading the file list: %v", ErrHTTP, u, err)
	}
	names := make([]string, 0, len(info.Siblings))
	for _, s := range info.Siblings {
		names = append(names, s.Name)
	}
	return names, nil
}

func (c *Client) filesURL(ref Ref) string {
	return fmt.Sprintf("%s/api/models/%s/revision/%s", c.Endpoint, ref.Repo, url.PathEscape(ref.Revision))
}

// pickFile chooses the GGUF of ref.Tag among names: the one whose name
// ends in the tag (case-insensitive, after "-", "." or "_"); with no tag,
// the DefaultTag file, else the first GGUF. Projector files (mmproj) are
// never picked, and split GGUFs are refused.
func pickFile(ref Ref, names []string) (string, error) {
	var ggufs []string
	for _, n := range names {
		low := strings.ToLower(path.Base(n))
		if strings.HasSuffix(low, ".gguf") && !strings.Contains(low, "mmproj") {
			ggufs = append(ggufs, n)
		}
	}
	sort.Strings(ggufs)
	if len(ggufs) == 0 {
		return "", fmt.Errorf("%w: %s has no GGUF files", ErrNoMatch, ref.Repo)
	}
	match := func(tag string) []string {
		var out []string
		t := strings.ToLower(tag)
		for _, n := range ggufs {
			stem := strings.TrimSuffix(strings.ToLower(path.Base(n)), ".gguf")
			if stem == t || strings.HasSuffix(stem, "-"+t) || strings.HasSuffix(stem, "."+t) || strings.HasSuffix(stem, "_"+t) {
				out = append(out, n)
			}
		}
		return out
	}
	tag := ref.Tag
	var got []string
	if tag == "" {
		if got = match(DefaultTag); len(got) == 0 {
			got = ggufs[:1]
		}
	} else {
		got = match(tag)
	}
	switch {
	case len(got) == 0:
		return "", fmt.Errorf("%w: %s has no GGUF for tag %q; its GGUF files: %s", ErrNoMatch, ref.Repo, tag, strings.Join(ggufs, ", "))
	case len(got) > 1:
		return "", fmt.Errorf("%w: %s: tag %q matches %d files (%s); name the file", ErrNoMatch, ref.Repo, tag, len(got), strings.Join(got, ", "))
	}
	if isSplit(got[0]) {
		return "", fmt.Errorf("%w: %s is one part of a split GGUF, which kvwarden does not load; pick a single-file quantization", ErrNoMatch, got[0])
	}
	return got[0], nil
}

func isSplit(name string) bool {
	stem := strings.TrimSuffix(strings.ToLower(path.Base(name)), ".gguf")
	i := strings.LastIndex(stem, "-of-")
	return i > 6 && stem[i-6] == '-'
}

func (c *Client) authorize(req *http.Request) {
	if c.Token == "" {
		return
	}
	// Only the hub gets the token, never a CDN it redirects to.
	if hu, err := url.Parse(c.Endpoint); err == nil && hu.Host == req.URL.Host {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

func networkError(err error, u string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrNetwork, redact(u), err)
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.RawQuery = "" // signed CDN URLs carry credentials in the query
	return p.String()
}

func statusError(resp *http.Response, ref Ref, file string) error {
	what := ref.Repo
	if file != "" {
		what += ": " + file
	}
	msg := hubMessage(resp)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent:
		return nil
	case http.StatusUnauthorized:
		return fmt.Errorf("%w: %s%s: the repository does not exist, or it is private or gated and needs a token: set HF_TOKEN to a Hugging Face access token", ErrUnauthorized, what, msg)
	case http.StatusForbidden:
		return fmt.Errorf("%w: %s%s: the token may not read this repository; for a gated model, accept its terms on the model page with the account of HF_TOKEN", ErrForbidden, what, msg)
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s at revision %s%s", ErrNotFound, what, ref.Revision, msg)
	}
	return fmt.Errorf("%w %d from %s: %s%s", ErrHTTP, resp.StatusCode, redact(resp.Request.URL.String()), what, msg)
}

// hubMessage is the hub's own explanation (X-Error-Message), if any.
func hubMessage(resp *http.Response) string {
	if m := resp.Header.Get("X-Error-Message"); m != "" {
		return " (" + m + ")"
	}
	return ""
}

// remote is what the hub says about a file.
type remote struct {
	url     string // where to GET the bytes (after the hub's redirect)
	size    int64
	sha256  string // lowercase hex, "" when the hub gave none
	gitSHA1 string // the git blob id of a non-LFS file
	commit  string
	etag    string
}

// head asks the hub for a file's size, digest and download URL, following
// redirects within the hub (renamed repositories) but not to the CDN.
func (c *Client) head(ctx context.Context, ref Ref) (remote, error) {
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, ref.Repo, url.PathEscape(ref.Revision), escapePath(ref.File))
	hc := *c.http()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
		if err != nil {
			return remote{}, err
		}
		req.Header.Set("Accept-Encoding", "identity")
		c.authorize(req)
		resp, err := hc.Do(req)
		if err != nil {
			return remote{}, networkError(err, u)
		}
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			loc, err := resp.Location()
			if err != nil {
				return remote{}, fmt.Errorf("%w %d without a Location from %s", ErrHTTP, resp.StatusCode, u)
			}
			if h.Get("X-Linked-Etag") == "" && h.Get("X-Linked-Size") == "" && sameHost(loc.String(), c.Endpoint) {
				u = loc.String() // a renamed repository: ask again there
				continue
			}
			return remoteOf(h, loc.String(), resp.ContentLength)
		}
		if err := statusError(resp, ref, ref.File); err != nil {
			return remote{}, err
		}
		return remoteOf(h, u, resp.ContentLength)
	}
	return remote{}, fmt.Errorf("%w: too many redirects resolving %s", ErrHTTP, u)
}

func remoteOf(h http.Header, downloadURL string, contentLength int64) (remote, error) {
	r := remote{url: downloadURL, commit: h.Get("X-Repo-Commit")}
	r.etag = h.Get("X-Linked-Etag")
	if r.etag == "" {
		r.etag = h.Get("ETag")
	}
	tag := strings.Trim(strings.TrimPrefix(r.etag, "W/"), `"`)
	switch {
	case isHex(tag, 64):
		r.sha256 = strings.ToLower(tag)
	case isHex(tag, 40):
		r.gitSHA1 = strings.ToLower(tag)
	}
	if s := h.Get("X-Linked-Size"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return r, fmt.Errorf("%w: bad X-Linked-Size %q", ErrHTTP, s)
		}
		r.size = n
	} else if contentLength > 0 {
		r.size = contentLength
	}
	return r, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// partialMeta records what a .partial file is a prefix of, so that a
// resume never appends the bytes of another version of the file.
type partialMeta struct {
	ETag string `json:"etag"`
	Size int64  `json:"size"`
}

// Pull downloads ref into the cache (resolving a tag first) and returns
// the cached model. A file already in the cache at the hub's current
// digest is not downloaded again, once its bytes on disk still hash to
// that digest (a file that changed is downloaded again). An interrupted
// download stays in downloads/ and the next Pull resumes it; a download
// that fails verification, or that runs past the size the hub declared,
// is deleted. Every write goes through an os.Root of CacheDir, and names
// that would leave it are refused with ErrUnsafeName.
func (c *Client) Pull(ctx context.Context, ref Ref) (Model, error) {
	ref, err := c.Resolve(ctx, ref)
	if err != nil {
		return Model{}, err
	}
	if err := checkRef(ref); err != nil {
		return Model{}, err
	}
	rem, err := c.head(ctx, ref)
	if err != nil {
		return Model{}, err
	}
	if (rem.size == 0 || (rem.sha256 == "" && rem.gitSHA1 == "")) && !c.AllowUnverified {
		return Model{}, fmt.Errorf("%w: %s: size %d, digest %q; pass --allow-unverified to download it anyway",
			ErrUnverifiable, ref.File, rem.size, rem.etag)
	}
	root, err := c.openCache()
	if err != nil {
		return Model{}, err
	}
	defer root.Close()
	final, part := modelRel(ref.Repo, ref.File), partialRel(ref.Repo, ref.File)
	if m, err := readMetaIn(root, final); err == nil && sameContent(m, rem) {
		// The record says it matches; make sure the bytes still do.
		sum, err := fileSHA256(root, final)
		if err != nil {
			return Model{}, err
		}
		if sum == m.SHA256 {
			return m, nil
		}
		// Changed on disk since it was verified: fetch it again.
		if err := root.Remove(final); err != nil {
			return Model{}, err
		}
		_ = root.Remove(final + metaSuffix)
	}
	if err := root.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		return Model{}, err
	}
	// A partial of another version (or with no record) starts over.
	want := partialMeta{ETag: rem.etag, Size: rem.size}
	var have partialMeta
	if b, err := root.ReadFile(part + ".json"); err != nil || json.Unmarshal(b, &have) != nil || have != want || rem.etag == "" {
		_ = root.Remove(part)
	}
	if err := writeFileAtomicIn(root, part+".json", mustJSON(want)); err != nil {
		return Model{}, err
	}
	h256, h1 := sha256.New(), sha1.New()
	if rem.gitSHA1 != "" {
		fmt.Fprintf(h1, "blob %d\x00", rem.size)
	}
	drop := func() {
		_ = root.Remove(part)
		_ = root.Remove(part + ".json")
	}
	n, err := c.download(ctx, root, ref, rem, part, h256, h1)
	if err != nil {
		// Keep the bytes of an interrupted transfer for the next pull;
		// anything else (a refusal, nothing received) leaves no trace.
		if n == 0 || !(errors.Is(err, ErrNetwork) || ctx.Err() != nil) {
			drop()
		}
		return Model{}, err
	}
	// Verify before anything reaches models/.
	sum := hex.EncodeToString(h256.Sum(nil))
	fail := func(format string, args ...any) (Model, error) {
		drop()
		return Model{}, fmt.Errorf("%w: %s: "+format+"; the download was deleted, pull again", append([]any{ErrVerify, ref.File}, args...)...)
	}
	switch {
	case rem.size > 0 && n != rem.size:
		return fail("%d bytes, the hub says %d", n, rem.size)
	case rem.sha256 != "" && sum != rem.sha256:
		return fail("SHA-256 %s, the hub says %s", sum, rem.sha256)
	case rem.gitSHA1 != "" && hex.EncodeToString(h1.Sum(nil)) != rem.gitSHA1:
		return fail("git blob id %x, the hub says %s", h1.Sum(nil), rem.gitSHA1)
	}
	if err := root.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return Model{}, err
	}
	if err := root.Rename(part, final); err != nil {
		return Model{}, err
	}
	_ = root.Remove(part + ".json")
	m := Model{Repo: ref.Repo, Revision: ref.Revision, File: ref.File, Commit: rem.commit, Size: n,
		SHA256: sum, GitSHA1: rem.gitSHA1, Pulled: time.Now().UTC().Truncate(time.Second), Path: filepath.Join(c.CacheDir, final)}
	if err := writeFileAtomicIn(root, final+metaSuffix, mustJSON(m)); err != nil {
		return Model{}, err
	}
	return m, nil
}

func sameContent(m Model, rem remote) bool {
	switch {
	case rem.size > 0 && m.Size != rem.size:
		return false
	case rem.sha256 != "":
		return m.SHA256 == rem.sha256
	case rem.gitSHA1 != "":
		return m.GitSHA1 == rem.gitSHA1
	}
	return false // nothing to compare: fetch again
}

// download appends the rest of the file to part (inside root), hashing
// everything in it, and returns its final length. It never writes past
// the size the hub declared: a server that sends more is an ErrVerify.
func (c *Client) download(ctx context.Context, root *os.Root, ref Ref, rem remote, part string, hs ...hash.Hash) (int64, error) {
	f, err := root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := io.MultiWriter(hashWriters(hs)...)
	have, err := io.Copy(w, f) // hash what an earlier run kept
	if err != nil {
		return 0, err
	}
	if rem.size > 0 && have > rem.size {
		if err := restart(f, hs); err != nil {
			return 0, err
		}
		have = 0
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rem.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	c.authorize(req)
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return have, c.interrupted(networkError(err, rem.url), filepath.Join(c.CacheDir, part), have)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0 && have == rem.size:
		return have, nil // an earlier run got everything
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return 0, fmt.Errorf("%w: asked for bytes %d-, got Content-Range %q", ErrHTTP, have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // the server ignored the Range: start over
			if err := restart(f, hs); err != nil {
				return 0, err
			}
			have = 0
		}
	default:
		if err := statusError(resp, ref, ref.File); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w %d from %s", ErrHTTP, resp.StatusCode, redact(rem.url))
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, err
	}
	pw := &progressWriter{c: c, p: Progress{File: ref.File, Done: have, Total: rem.size, Resumed: have, Started: time.Now()}}
	pw.report(true)
	var body io.Reader = ctxReader{ctx, resp.Body}
	if rem.size > 0 {
		// One byte more than declared tells an oversized file from an
		// exact one without writing past the declared size.
		body = io.LimitReader(body, rem.size-have+1)
	}
	dst := io.MultiWriter(f, w, pw)
	if rem.size > 0 {
		dst = &cappedWriter{w: dst, left: rem.size - have}
	}
	n, err := io.Copy(dst, body)
	have += n
	if errors.Is(err, errPastSize) {
		return have, fmt.Errorf("%w: %s: the server sent more than the %d bytes the hub declared; the download was deleted", ErrVerify, ref.File, rem.size)
	}
	if err != nil {
		return have, c.interrupted(networkError(err, rem.url), filepath.Join(c.CacheDir, part), have)
	}
	if err := f.Sync(); err != nil {
		return have, err
	}
	pw.p.Final = true
	pw.report(true)
	return have, nil
}

var errPastSize = errors.New("past the declared size")

// cappedWriter passes at most left bytes to w and fails on any more.
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > c.left {
		n, err := c.w.Write(b[:c.left])
		c.left -= int64(n)
		if err == nil {
			err = errPastSize
		}
		return n, err
	}
	n, err := c.w.Write(b)
	c.left -= int64(n)
	return n, err
}

func (c *Client) interrupted(err error, part string, have int64) error {
	return fmt.Errorf("%w (download interrupted; %d bytes kept in %s, pull again to resume)", err, have, part)
}

func restart(f *os.File, hs []hash.Hash) error {
	for _, h := range hs {
		h.Reset()
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

func hashWriters(hs []hash.Hash) []io.Writer {
	out := make([]io.Writer, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

// ctxReader stops at the next read once ctx is done, whatever the
// transport still has buffered.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

type progressWriter struct {
	c    *Client
	p    Progress
	last time.Time
}

func (w *progressWriter) Write(b []byte) (int, error) {
	w.p.Done += int64(len(b))
	w.report(false)
	return len(b), nil
}

func (w *progressWriter) report(force bool) {
	if w.c.Progress == nil {
		return
	}
	every := w.c.ProgressEvery
	if every == 0 {
		every = 100 * time.Millisecond
	}
	if now := time.Now(); force || now.Sub(w.last) >= every {
		w.last = now
		w.c.Progress(w.p)
	}
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only plain structs are marshalled
	}
	return append(b, '\n')
}
