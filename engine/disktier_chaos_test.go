package engine

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiskTierChaos: three tenants share prompt prefixes of their own over
// a small pool with a host tier and a small disk tier, across several
// engine restarts with the same key file, while the test damages the
// directory between requests: torn files, flipped bytes, deleted files,
// files swapped between names, garbage files. Every output is exactly the
// echo oracle's (what the tenant alone would get), no request errs, and no
// isolation check fails: a damaged file is only ever a miss.
func TestDiskTierChaos(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 9)
	rng := rand.New(rand.NewPCG(27, 1))
	tenants := []string{"a", "b", "c"}
	// Each tenant has a few long prompts sharing a long prefix, so prefix
	// pages are reused across requests and restarts.
	prompts := map[string][][]int{}
	for ti, tn := range tenants {
		base := tenantPrompt(ti+1, 1, 20)
		for v := range 3 {
			p := append(append([]int(nil), base...), tenantPrompt(ti+1, 10+v, 9)[1:]...)
			prompts[tn] = append(prompts[tn], p)
		}
	}
	damage := func() {
		files := pageFiles(t, dir)
		if len(files) == 0 {
			return
		}
		f := files[rng.IntN(len(files))]
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		switch rng.IntN(5) {
		case 0: // torn write
			require.NoError(t, os.WriteFile(f, b[:rng.IntN(len(b))], 0o600))
		case 1: // a flipped byte
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			require.NoError(t, os.WriteFile(f, b, 0o600))
		case 2:
			require.NoError(t, os.Remove(f))
		case 3: // another file's content under this name
			g := files[rng.IntN(len(files))]
			c, err := os.ReadFile(g)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(f, c, 0o600))
		case 4: // garbage under a page file's name
			require.NoError(t, os.WriteFile(filepath.Join(dir, "0123456789abcdef0123456789abcdef01234567"+diskExt),
				[]byte("KVWDISK1 not a page at all, but long enough to have a header"), 0o600))
		}
	}
	var restoredFromDisk, failedTags uint64
	for round := range 4 {
		cfg := diskConfig(t, dir, key)
		cfg.KVDiskBudget = 24 * 1024 // a few dozen pages: evictions happen
		e := newEcho(t, cfg)
		for range 12 {
			tn := tenants[rng.IntN(len(tenants))]
			p := prompts[tn][rng.IntN(len(prompts[tn]))]
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 4, Tenant: tn})
			require.NoError(t, err, "round %d", round)
			require.Equal(t, echoOracle(p, 4, e.MaxContext(), false), r.Tokens, "round %d tenant %s", round, tn)
			if rng.IntN(2) == 0 {
				damage()
			}
			if rng.IntN(4) == 0 {
				spillAll(t, e, "filler", 100+rng.IntN(1000)) // pressure: device to host to disk
			}
		}
		s := e.Stats()
		require.Zero(t, s.IsolationFailures, "round %d", round)
		require.Zero(t, s.Pool.IsolationViolations, "round %d", round)
		require.LessOrEqual(t, s.Disk.Used, cfg.KVDiskBudget)
		restoredFromDisk += s.Disk.Hits
		failedTags += s.Disk.SealFailures
		require.NoError(t, e.Close())
		require.LessOrEqual(t, dirBytes(t, dir), cfg.KVDiskBudget)
		damage()
	}
	require.Positive(t, restoredFromDisk, "the disk tier served hits between the faults")

	// Whether the random faults above hit a file that a later request
	// looks up depends on the page files' names (hashes of the model's and
	// the pool's fingerprint), so it proves nothing alone. A last restart
	// with every remaining page file damaged does: a fresh engine has
	// nothing on the device or in the host tier, so each tenant's first
	// request looks its prefix up on the disk and meets a damaged file.
	files := pageFiles(t, dir)
	require.NotEmpty(t, files, "the rounds left pages on the disk")
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		require.NoError(t, os.WriteFile(f, b, 0o600))
	}
	cfg := diskConfig(t, dir, key)
	cfg.KVDiskBudget = 24 * 1024
	e := newEcho(t, cfg)
	for _, tn := range tenants {
		for _, p := range prompts[tn] {
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 4, Tenant: tn})
			require.NoError(t, err)
			require.Equal(t, echoOracle(p, 4, e.MaxContext(), false), r.Tokens, "tenant %s", tn)
		}
	}
	s := e.Stats()
	require.NoError(t, e.Close())
	require.Zero(t, s.IsolationFailures)
	require.Zero(t, s.Disk.Hits, "every page file was damaged: none may be a hit")
	require.Positive(t, s.Disk.SealFailures, "damaged files were met, and were misses")
	t.Logf("damaged files met: %d in the random rounds, %d after damaging every file", failedTags, s.Disk.SealFailures)
}
