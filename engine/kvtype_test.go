package engine

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// A quantized KV type sizes the pool from its own page bytes: the same
// KVMemory holds 1.88x (q8_0) or 3.56x (q4_0) the pages of f16.
func TestKVTypePoolSizing(t *testing.T) {
	for _, tc := range []struct {
		kv string
		dt device.DType
	}{{"f16", device.F16}, {"q8_0", device.Q8_0}, {"q4_0", device.Q4_0}} {
		t.Run(tc.kv, func(t *testing.T) {
			e, err := New(Config{KVType: tc.kv, KVMemory: 8 << 20, Device: "cpu"})
			require.NoError(t, err)
			defer e.Close()
			mc := e.ModelConfig()
			pb := kvcache.Geometry{PageSize: 16, Layers: mc.Layers, KVHeads: mc.KVHeads, HeadDim: mc.HeadDim, DType: tc.dt}.PageBytes()
			c := e.Config()
			require.Equal(t, tc.kv, c.KVType)
			require.Equal(t, int((8<<20)/pb), c.KVPages)
			require.Equal(t, int64(c.KVPages)*pb, c.KVMemory)
			require.Equal(t, pb, c.PageBytes())
			r, err := e.Generate(t.Context(), Request{Prompt: "Hello", MaxTokens: 8})
			require.NoError(t, err)
			require.Len(t, r.Tokens, 8)
		})
	}
}

// With a quantized KV every request produces, in a crowded pool that
// preempts and swaps sequences through the host tier (checksummed over the
// quantized bytes) and with prefill split in chunks, the tokens it
// produces alone; the prefix cache serves a repeated prompt.
func TestKVTypeQuantizedThroughEngine(t *testing.T) {
	g := testmodels.LoadArchGolden(t, "llama32")
	for _, kv := range []string{"q8_0", "q4_0"} {
		t.Run(kv, func(t *testing.T) {
			alone := archEngine(t, g.Model, func(c *Config) { c.KVType = kv })
			want := make([][]int, len(g.Cases))
			for i, c := range g.Cases {
				r, err := alone.Generate(t.Context(), Request{Tokens: c.Prompt, MaxTokens: len(c.Generated)})
				require.NoError(t, err)
				want[i] = r.Tokens
			}
			// Again: the prompts' pages now come from the prefix cache.
			for i, c := range g.Cases {
				r, err := alone.Generate(t.Context(), Request{Tokens: c.Prompt, MaxTokens: len(c.Generated)})
				require.NoError(t, err)
				require.Equal(t, want[i], r.Tokens, "case %d from the prefix cache", i)
			}
			require.NotZero(t, alone.Stats().PrefixHits)

			gate := make(chan struct{})
			hold := WithTestHooks(TestHooks{Faults: &Faults{AbortAt: func(uint64, State) bool {
				<-gate
				return false
			}}})
			e := archEngine(t, g.Model, func(c *Config) {
				c.KVType, c.KVPages, c.HostTierBytes, c.MaxBatchTokens, c.MaxContext = kv, 8, 16<<20, 8, 96
			}, hold)
			var streams []*Stream
			var idx []int
			for k := range 2 {
				for i, c := range g.Cases {
					st, err := e.Submit(t.Context(), Request{Tokens: c.Prompt, MaxTokens: len(c.Generated), Tenant: string(rune('a' + k))})
					require.NoError(t, err)
					streams, idx = append(streams, st), append(idx, i)
				}
			}
			close(gate)
			for j, st := range streams {
				r := st.Wait()
				require.NoError(t, r.Err)
				require.Equal(t, want[idx[j]], r.Tokens, "request %d (case %d)", j, idx[j])
			}
			s := e.Stats()
			require.NotZero(t, s.SwapIns, "%+v", s)
			require.Zero(t, s.IsolationFailures)
		})
	}
}

func TestKVTypeErrors(t *testing.T) {
	_, err := New(Config{KVType: "q5_0"})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, "q8_0 or q4_0")

	// stories260K has a head dim of 8: not whole blocks of 32.
	_, err = New(Config{ModelPath: testmodels.Path(t, "stories260K.gguf"), KVType: "q8_0", Device: "cpu"})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, "head dim 8")
}

// Prefix-cache keys depend on the KV type: the same tokens hash apart in
// caches over pools of different types, so their pages can never be taken
// for one another.
func TestPrefixKeyIncludesKVType(t *testing.T) {
	hashes := map[uint64]device.DType{}
	for _, dt := range []device.DType{device.F32, device.F16, device.Q8_0, device.Q4_0} {
		pool, err := kvcache.New(cpu.New(), kvcache.Config{
			Geometry: kvcache.Geometry{PageSize: 4, Layers: 1, KVHeads: 1, HeadDim: 32, DType: dt}, Pages: 2,
		})
		require.NoError(t, err)
		c := newPrefixCache(pool, nil, slog.Default(), false)
		s := &seq{tokens: []int{1, 2, 3, 4, 5, 6, 7, 8}}
		h := c.chainHash(s, 1)
		prev, dup := hashes[h]
		require.False(t, dup, "%s hashes like %s", dt, prev)
		hashes[h] = dt
		require.NoError(t, pool.Close())
	}
}

// Speculative decoding over a quantized KV: drafted tokens' K and V are
// written as blocks and rolled back on rejection, and greedy output is the
// same with and without speculation (the built-in synthetic model: head
// dim 32).
func TestKVTypeQuantizedSpeculative(t *testing.T) {
	prompts := []string{"abcabcabcabcabc", "the cat the cat the cat the", "zq xv kj pw"}
	for _, kv := range []string{"q8_0", "q4_0"} {
		t.Run(kv, func(t *testing.T) {
			open := func(spec bool) *Engine {
				cfg := Config{KVType: kv, KVPages: 128, Device: "cpu", Poison: true}
				if spec {
					cfg.Speculative = Speculative{Type: SpecNgram, DraftMax: 6}
				}
				e, err := New(cfg)
				require.NoError(t, err)
				t.Cleanup(func() { _ = e.Close() })
				return e
			}
			plain, spec := open(false), open(true)
			for i, p := range prompts {
				r := Request{Prompt: p, MaxTokens: 64, Sampling: sample.Greedy()}
				want, err := plain.Generate(t.Context(), r)
				require.NoError(t, err)
				got, err := spec.Generate(t.Context(), r)
				require.NoError(t, err)
				require.Equal(t, want.Tokens, got.Tokens, "prompt %d", i)
			}
			st := spec.Stats().Spec
			t.Logf("spec stats: %+v", st)
			require.NotZero(t, st.Accepted)
			require.Less(t, st.Accepted, st.Drafted, "some drafts rejected: their KV rolled back")
		})
	}
}
