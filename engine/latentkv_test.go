package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels/tiny"
)

// tinyDeepseek2 writes the tiny deepseek2 file (latent attention: 2
// layers, kv_lora_rank 16 + 8 rotated dims, one KV head of 24) and
// returns its path.
func tinyDeepseek2(t *testing.T) string {
	t.Helper()
	s, err := tiny.ByName("deepseek2")
	require.NoError(t, err)
	data, err := tiny.Build(s)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "deepseek2.gguf")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestLatentKVPageBytes: a deepseek2 engine's pool holds one latent row
// per token and layer, layers x (kv_lora_rank + rope dims) x element size,
// what llama.cpp's cache holds, and KVMemory buys pages of that size.
func TestLatentKVPageBytes(t *testing.T) {
	path := tinyDeepseek2(t)
	const layers, row = 2, 16 + 8
	for _, tc := range []struct {
		kvType string
		elem   int64
	}{{"f32", 4}, {"f16", 2}} {
		t.Run(tc.kvType, func(t *testing.T) {
			e, err := New(Config{ModelPath: path, Device: "cpu", PageSize: 16, KVMemory: 1 << 16, KVType: tc.kvType})
			require.NoError(t, err)
			defer e.Close()
			page := int64(16 * layers * row * tc.elem)
			c := e.Config()
			require.Equal(t, page, c.PageBytes())
			require.Equal(t, int((1<<16)/page), c.KVPages)
			require.Equal(t, int64(c.KVPages)*page, c.KVMemory)
			require.True(t, e.pool.Geometry().KOnly)
		})
	}
}

// TestLatentKVDiskRoundTrip: K-only pages of a deepseek2 engine go
// through the host tier to disk on a graceful close and come back on a
// restart as prefix hits, with the output computed without them, and no
// seal or isolation failure.
func TestLatentKVDiskRoundTrip(t *testing.T) {
	path := tinyDeepseek2(t)
	dir, key := t.TempDir(), writeKeyFile(t, 3)
	cfg := Config{ModelPath: path, Device: "cpu", PageSize: 4, KVPages: 32, MaxContext: 64, Poison: true,
		HostTierBytes: 1 << 20, KVDisk: dir, KVDiskBudget: 1 << 20, KVKeyFile: key}
	prompt := make([]int, 25) // 6 full pages of 4 are cacheable
	for i := range prompt {
		prompt[i] = tiny.FirstNormal + (i*7)%50
	}
	req := Request{Tokens: prompt, MaxTokens: 4, Tenant: "alice"}

	e, err := New(cfg)
	require.NoError(t, err)
	first, err := e.Generate(t.Context(), req)
	require.NoError(t, err)
	require.Zero(t, first.CachedTokens)
	require.NoError(t, e.Close())
	require.Positive(t, e.Stats().Disk.Writes)

	e, err = New(cfg)
	require.NoError(t, err)
	defer e.Close()
	again, err := e.Generate(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 24, again.CachedTokens, "the prefix from disk")
	require.Equal(t, first.Tokens, again.Tokens)
	s := e.Stats()
	require.Equal(t, uint64(6), s.Disk.Hits)
	require.Zero(t, s.Disk.SealFailures)
	require.Zero(t, s.IsolationFailures)
}

// TestKVFingerprintBindsPlanes: the KV fingerprint that sealed pages
// (host and disk tier) are bound to tells a K-only layout from a
// two-plane one of the same dimensions, and two-plane fingerprints are
// the ones written before K-only layouts existed (disk tiers of existing
// models stay readable).
func TestKVFingerprintBindsPlanes(t *testing.T) {
	fp := sha256.Sum256([]byte("model"))
	two := kvcache.Geometry{PageSize: 16, Layers: 2, KVHeads: 1, HeadDim: 24, DType: device.F16}
	one := two
	one.KOnly = true
	h := sha256.New()
	h.Write([]byte("kvwarden kv fingerprint v1"))
	h.Write(fp[:])
	var b []byte
	for _, v := range []int{int(two.DType), two.PageSize, two.Layers, two.KVHeads, two.HeadDim} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	h.Write(b)
	require.Equal(t, h.Sum(nil), kvFingerprintOf(fp, two))
	require.NotEqual(t, kvFingerprintOf(fp, two), kvFingerprintOf(fp, one))
	require.Equal(t, kvFingerprintOf(fp, one), kvFingerprintOf(fp, one))
}

// TestLatentKVThroughEngine: deepseek2 requests of two tenants at once in
// a K-only pool too small for them, with chunked prefill, so that the
// scheduler preempts and swaps sequences through the host tier and back:
// each produces the tokens it produced alone, with no isolation failure
// (the pool poisons free pages, so a read past the K plane would show).
func TestLatentKVThroughEngine(t *testing.T) {
	path := tinyDeepseek2(t)
	prompts := make([][]int, 3)
	for i := range prompts {
		for j := range 40 + 5*i {
			prompts[i] = append(prompts[i], tiny.FirstNormal+(j*(3+i)+i)%60)
		}
	}
	const gen = 16
	alone, err := New(Config{ModelPath: path, Device: "cpu", KVPages: 64, MaxContext: 96, Poison: true})
	require.NoError(t, err)
	defer alone.Close()
	want := make([][]int, len(prompts))
	for i, p := range prompts {
		r, err := alone.Generate(t.Context(), Request{Tokens: p, MaxTokens: gen, Tenant: "a"})
		require.NoError(t, err)
		want[i] = r.Tokens
	}
	require.NotEqual(t, want[0], want[1], "the prompts lead to different outputs")

	// Held at its first state change until every request is queued, so
	// that they contend for pages whatever the timing.
	gate := make(chan struct{})
	hold := WithTestHooks(TestHooks{Faults: &Faults{AbortAt: func(uint64, State) bool {
		<-gate
		return false
	}}})
	e, err := New(Config{ModelPath: path, Device: "cpu", KVPages: 8, MaxContext: 96, Poison: true,
		HostTierBytes: 1 << 20, MaxBatchTokens: 24}, hold)
	require.NoError(t, err)
	defer e.Close()
	var streams []*Stream
	var idx []int
	for k := range 2 {
		for i, p := range prompts {
			st, err := e.Submit(t.Context(), Request{Tokens: p, MaxTokens: gen, Tenant: string(rune('a' + k))})
			require.NoError(t, err)
			streams, idx = append(streams, st), append(idx, i)
		}
	}
	close(gate)
	for j, st := range streams {
		r := st.Wait()
		require.NoError(t, r.Err)
		require.Equal(t, want[idx[j]], r.Tokens, "request %d (prompt %d)", j, idx[j])
	}
	s := e.Stats()
	require.NotZero(t, s.SwapIns, "%+v", s)
	require.Zero(t, s.IsolationFailures)
	require.Zero(t, s.Pool.IsolationViolations)
}
