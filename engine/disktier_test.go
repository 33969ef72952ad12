package engine

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// writeKeyFile writes a 32-byte master key made of b.
func writeKeyFile(t *testing.T, b byte) string {
	path := filepath.Join(t.TempDir(), "kv.key")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{b}, 32), 0o600))
	return path
}

// diskConfig is hostSpillConfig with a disk tier in dir under key.
func diskConfig(t *testing.T, dir, key string) Config {
	cfg := hostSpillConfig(t)
	cfg.KVDisk, cfg.KVDiskBudget, cfg.KVKeyFile = dir, 1<<20, key
	return cfg
}

// pageFiles lists the disk tier's page files in dir.
func pageFiles(t *testing.T, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*"+diskExt))
	require.NoError(t, err)
	return m
}

// dirBytes is the size of every file the disk tier writes pages to
// (page files and temporary files).
func dirBytes(t *testing.T, dir string) int64 {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), diskExt) || strings.HasPrefix(e.Name(), diskTmp) {
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // renamed or evicted since the listing
			}
			require.NoError(t, err)
			n += info.Size()
		}
	}
	return n
}

// longPrompt is tenant 1's 25-token prompt: 6 full pages of 4 tokens are
// cacheable (one token is always computed).
var longPrompt = tenantPrompt(1, 1, 25)

// seedDisk runs longPrompt for alice on a fresh engine over dir and closes
// it gracefully, which writes the prefix cache to disk. It returns the
// output.
func seedDisk(t *testing.T, dir, key string) Result {
	e := newEcho(t, diskConfig(t, dir, key))
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens)
	require.NoError(t, e.Close())
	require.Positive(t, e.Stats().Disk.Writes)
	require.NotEmpty(t, pageFiles(t, dir))
	return r
}

// TestDiskTierRestart: after a graceful restart with the same key file,
// alice's long prompt is a prefix hit from disk with the exact output;
// bob never hits alice's pages; with another key file the prompt is a
// miss, with no error.
func TestDiskTierRestart(t *testing.T) {
	dir, keyA, keyB := t.TempDir(), writeKeyFile(t, 1), writeKeyFile(t, 2)
	r1 := seedDisk(t, dir, keyA)

	e := newEcho(t, diskConfig(t, dir, keyA))
	for _, tenant := range []string{"bob", "", "alice "} {
		r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: tenant})
		require.NoError(t, err)
		require.Zero(t, r.CachedTokens, "tenant %q hit alice's pages", tenant)
		require.Equal(t, r1.Tokens, r.Tokens)
	}
	require.Zero(t, e.Stats().Disk.Hits)
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, 24, r.CachedTokens, "alice's prefix from disk")
	require.Equal(t, r1.Tokens, r.Tokens)
	s := e.Stats()
	require.Equal(t, uint64(6), s.Disk.Hits)
	require.Zero(t, s.Disk.SealFailures)
	require.Zero(t, s.IsolationFailures)
	require.NoError(t, e.Close())

	other := newEcho(t, diskConfig(t, dir, keyB))
	r, err = other.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens, "another key file: a miss")
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Zero(t, other.Stats().Disk.Hits)
}

// TestDiskTierBoundToModel: pages written for one model are never read
// for another one of the same shape (other weights).
func TestDiskTierBoundToModel(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 1)
	r1 := seedDisk(t, dir, key)
	cfg := diskConfig(t, dir, key)
	w, err := model.Synthetic(echoModelConfig(), 2, ml.F32)
	require.NoError(t, err)
	cfg.Weights = w
	e := newEcho(t, cfg)
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens)
	require.Equal(t, r1.Tokens, r.Tokens, "the echo runner ignores the weights")
	require.Zero(t, e.Stats().Disk.Hits)
}

// TestDiskTierFilesAreCiphertext: no page file has structure a compressor
// can find, and flipping any byte of a file makes that page a miss,
// counted, with the exact output and no error.
func TestDiskTierFilesAreCiphertext(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 1)
	r1 := seedDisk(t, dir, key)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	require.NoError(t, err)
	defer enc.Close()
	files := pageFiles(t, dir)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		body := b[diskHdrSize:]
		require.GreaterOrEqual(t, len(enc.EncodeAll(body, nil)), len(body), "%s compresses", f)
	}

	// The first page's file: every byte of it flipped in turn.
	probe := newEcho(t, diskConfig(t, t.TempDir(), key))
	first := filepath.Join(dir, probe.tiers.disk.name("alice", strongHash([32]byte{}, longPrompt[:4])))
	require.NoError(t, probe.Close())
	orig, err := os.ReadFile(first)
	require.NoError(t, err)
	for i := range orig {
		b := bytes.Clone(orig)
		b[i] ^= 0x01
		require.NoError(t, os.WriteFile(first, b, 0o600))
		e, err := New(diskConfig(t, dir, key))
		require.NoError(t, err)
		r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
		require.NoError(t, err, "byte %d", i)
		require.Zero(t, r.CachedTokens, "byte %d", i)
		require.Equal(t, r1.Tokens, r.Tokens)
		s := e.Stats()
		require.Equal(t, uint64(1), s.Disk.SealFailures, "byte %d", i)
		require.Zero(t, s.IsolationFailures)
		require.NoFileExists(t, first, "a bad file is deleted")
		// Not Close: that would write the recomputed page back.
		e.tiers.disk.close()
		e.tiers.disk = nil
		e.sched.prefix.(*prefixCache).disk = nil
		require.NoError(t, e.Close())
	}
}

// TestDiskTierErase: after the erasure alice's prompt is a miss on the
// device, the host tier and disk: her files are gone, and a copy of them
// put back (a backup) fails its tag after a restart; bob keeps his.
func TestDiskTierErase(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 1)
	r1 := seedDisk(t, dir, key)
	backup := map[string][]byte{}
	for _, f := range pageFiles(t, dir) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		backup[f] = b
	}

	e := newEcho(t, diskConfig(t, dir, key))
	pb := tenantPrompt(2, 2, 13)
	rb, err := e.Generate(t.Context(), Request{Tokens: pb, MaxTokens: 3, Tenant: "bob"})
	require.NoError(t, err)
	res, err := e.EraseTenantKV(t.Context(), "alice")
	require.NoError(t, err)
	require.Equal(t, len(backup), res.DiskFiles)
	require.Positive(t, res.DiskBytes)
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens)
	require.Equal(t, r1.Tokens, r.Tokens)
	res, err = e.EraseTenantKV(t.Context(), "alice") // what that request cached
	require.NoError(t, err)
	require.Positive(t, res.PrefixDevicePages)
	require.NoError(t, e.Close())

	for f, b := range backup {
		require.NoError(t, os.WriteFile(f, b, 0o600))
	}
	e = newEcho(t, diskConfig(t, dir, key))
	r, err = e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens, "pages of an erased epoch never open")
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Positive(t, e.Stats().Disk.SealFailures)
	r, err = e.Generate(t.Context(), Request{Tokens: pb, MaxTokens: 3, Tenant: "bob"})
	require.NoError(t, err)
	require.Equal(t, 12, r.CachedTokens, "bob's pages survive alice's erasure")
	require.Equal(t, rb.Tokens, r.Tokens)
}

// TestDiskTierBudget: many distinct prompts, with no host tier (evicted
// device pages go straight to disk), never take the directory over its
// budget, checked after every request and at the end.
func TestDiskTierBudget(t *testing.T) {
	dir := t.TempDir()
	cfg := noEOS(echoConfig(t, 16, 4))
	probe := newEcho(t, cfg)
	pageBytes := probe.pool.Geometry().PageBytes()
	require.NoError(t, probe.Close())
	budget := 5*pageBytes + 100 // a few files (each a page plus its framing, compressed)
	cfg.KVDisk, cfg.KVDiskBudget, cfg.KVKeyFile = dir, budget, writeKeyFile(t, 3)
	e := newEcho(t, cfg)
	for i := range 40 {
		p := tenantPrompt(i%5, 100+i, 30)
		r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 3, Tenant: []string{"a", "b", "c"}[i%3]})
		require.NoError(t, err)
		require.Equal(t, echoOracle(p, 3, e.MaxContext(), false), r.Tokens)
		require.LessOrEqual(t, dirBytes(t, dir), budget)
		require.LessOrEqual(t, e.Stats().Disk.Used, budget)
	}
	e.tiers.disk.flush()
	s := e.Stats().Disk
	require.Positive(t, s.Writes)
	require.Positive(t, s.Evictions, "%+v", s)
	require.LessOrEqual(t, s.Used, budget)
	require.Equal(t, s.Used, dirBytes(t, dir))
	require.NoError(t, e.Close())
	require.LessOrEqual(t, dirBytes(t, dir), budget)
}

// TestDiskTierCrashLeftovers: what a crash leaves (a temporary file, a
// torn page file) is cleaned up or detected on start: the torn page is a
// miss, counted, never read.
func TestDiskTierCrashLeftovers(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 1)
	r1 := seedDisk(t, dir, key)
	tmp := filepath.Join(dir, diskTmp+"deadbeef")
	require.NoError(t, os.WriteFile(tmp, []byte("half a page"), 0o600))
	files := pageFiles(t, dir)
	for i, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		cut := len(b) / 2
		if i == 0 {
			cut = 10 // not even a header
		}
		require.NoError(t, os.WriteFile(f, b[:cut], 0o600))
	}
	e := newEcho(t, diskConfig(t, dir, key))
	require.NoFileExists(t, tmp)
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Zero(t, r.CachedTokens)
	require.Positive(t, e.Stats().Disk.SealFailures)
	require.Zero(t, e.Stats().IsolationFailures)
}

// TestDiskTierConfig: the disk tier's settings are checked, and a
// directory is held by one engine at a time.
func TestDiskTierConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		mod    func(*Config)
		field  string
		errSub string
	}{
		{"no budget", func(c *Config) { c.KVDisk = dir }, "KVDiskBudget", "needs a budget"},
		{"negative budget", func(c *Config) { c.KVDisk, c.KVDiskBudget = dir, -1 }, "KVDiskBudget", "negative"},
		{"budget without dir", func(c *Config) { c.KVDiskBudget = 1 << 20 }, "KVDisk", "without"},
		{"bad key file", func(c *Config) { c.KVKeyFile = filepath.Join(dir, "none") }, "KVKeyFile", "key file"},
		{"no prefix cache", func(c *Config) { c.KVDisk, c.KVDiskBudget, c.DisablePrefixCache = dir, 1<<20, true }, "KVDisk", "prefix cache is disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := echoConfig(t, 16, 4)
			tc.mod(&cfg)
			_, err := New(cfg)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
			require.Contains(t, err.Error(), tc.errSub)
			require.ErrorIs(t, err, ErrInvalidParams)
		})
	}
	key := writeKeyFile(t, 1)
	newEcho(t, diskConfig(t, dir, key))
	_, err := New(diskConfig(t, dir, key))
	require.ErrorIs(t, err, errDiskInUse)
}

// TestDiskTierEvictionIsTenantFair: when the budget is reached, the tenant
// holding the most bytes gives up its least recently used file, so one
// tenant flooding the disk tier does not push another's few pages out.
func TestDiskTierEvictionIsTenantFair(t *testing.T) {
	keys, err := kvseal.New(bytes.Repeat([]byte{5}, 32), nil)
	require.NoError(t, err)
	defer keys.Close()
	const ps, rawLen = 4, 512
	probe := func(dir string, budget int64) *diskTier {
		d, err := openDiskTier(dir, budget, keys, []byte("model"), ps, rawLen, false, true, quietLog())
		require.NoError(t, err)
		return d
	}
	page := func(tenant string, i int) ([32]byte, []int, []byte) {
		tokens := []int{i, i + 1, i + 2, i + 3}
		raw := make([]byte, rawLen)
		r := rand.New(rand.NewPCG(uint64(i), uint64(len(tenant))))
		for j := range raw {
			raw[j] = byte(r.UintN(256))
		}
		return strongHash([32]byte{byte(len(tenant))}, tokens), tokens, raw
	}
	noDrop := func([]byte) {}
	// The size of one file, to size the budget in files.
	d := probe(t.TempDir(), 1<<20)
	s, tok, raw := page("x", 0)
	d.put("x", s, 0, tok, raw, true, noDrop)
	d.flush()
	one := d.stats().Used
	d.close()

	d = probe(t.TempDir(), 10*one)
	defer d.close()
	for i := range 2 {
		s, tok, raw := page("small", i)
		d.put("small", s, 0, tok, raw, true, noDrop)
	}
	for i := range 30 {
		s, tok, raw := page("hog", 100+i)
		d.put("hog", s, 0, tok, raw, true, noDrop)
	}
	d.flush()
	st := d.stats()
	require.LessOrEqual(t, st.Used, 10*one)
	require.Equal(t, uint64(22), st.Evictions)
	for i := range 2 {
		s, tok, raw := page("small", i)
		got, ok := d.load("small", s, 0, tok)
		require.True(t, ok, "small's page %d was evicted", i)
		require.Equal(t, raw, got)
	}
	s, tok, _ = page("hog", 100)
	_, ok := d.load("hog", s, 0, tok)
	require.False(t, ok, "the hog's oldest page went first")
	s, tok, _ = page("hog", 129)
	_, ok = d.load("hog", s, 0, tok)
	require.True(t, ok, "the hog's newest page stays")
}
