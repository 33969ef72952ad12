package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// TestSpecQuantizedKVOddRows: speculation with a q8_0 or q4_0 KV cache on
// a shape whose K/V rows are one block (34 or 18 bytes, so rejected tails
// start and end on any even byte), scrubbed or poisoned: greedy and seeded
// sampled output are the tokens without speculation, drafts were both
// accepted and rejected (rolled back), and no isolation check fired.
func TestSpecQuantizedKVOddRows(t *testing.T) {
	cfg := model.DefaultConfig()
	cfg.Dim, cfg.Hidden, cfg.Layers, cfg.Heads, cfg.KVHeads = 128, 256, 2, 4, 1
	w, err := model.Synthetic(cfg, 7, ml.F32)
	require.NoError(t, err)
	var reqs []Request
	for i := range 4 {
		// A prompt that repeats itself, so that n-grams find drafts.
		p := make([]int, 0, 60)
		for len(p) < 60 {
			p = append(p, 10+i, 20+i, 30+i, 40+3*i, 50)
		}
		reqs = append(reqs, Request{Tokens: p, MaxTokens: 40, Sampling: sample.Greedy()},
			Request{Tokens: p, MaxTokens: 40, Sampling: sample.Params{Temperature: 1, Seed: uint64(i), HasSeed: true}})
	}
	for _, kv := range []string{"q8_0", "q4_0"} {
		for _, scrub := range []string{"zero", "poison"} {
			t.Run(kv+"/"+scrub, func(t *testing.T) {
				eng := func(sp Speculative) *Engine {
					e, err := New(Config{Weights: w, Tokenizer: tokenizer.NewBytes(), KVType: kv, KVPages: 64, MaxSeqs: 8, Device: "cpu",
						ZeroOnRelease: scrub == "zero", Poison: scrub == "poison", KVChecksum: ChecksumStep, Speculative: sp})
					require.NoError(t, err)
					t.Cleanup(func() { closeClean(t, e) })
					return e
				}
				plain, spec := eng(Speculative{}), eng(Speculative{Type: SpecNgram, DraftMax: 5, NgramMin: 1, NgramMax: 3})
				want := runAll(t, plain, reqs)
				for j, got := range runAll(t, spec, reqs) {
					require.NoError(t, got.Err)
					require.Equal(t, want[j].Tokens, got.Tokens, "request %d", j)
				}
				st := spec.Stats()
				require.NotZero(t, st.Spec.Accepted, "%+v", st.Spec)
				require.Less(t, st.Spec.Accepted, st.Spec.Drafted, "some drafts rolled back")
				require.Zero(t, st.IsolationFailures)
			})
		}
	}
}
