package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvwarden/kvwarden/engine"
)

// KV depth (run -depth N), as llama-bench's -d N: the timed prefill of
// -npp tokens and decode of -ntg tokens start with N tokens already in the
// sequence's context. llama-bench fills its context with N tokens before
// each test and times only the test; kvwarden gets the same by the prefix
// cache: a warm-up request puts N prompt tokens in it, and every timed
// request starts with those N tokens (served from the cache: no prefill)
// followed by its own -npp tokens. So pp_tps is the prefill of -npp tokens
// attending to N + i earlier ones, and tg_tps decoding at depth
// N + npp ... N + npp + ntg. The output's cached_tokens says how many
// prompt tokens came from the cache (N per request when it works).

// depthTokens is the depth prefix of this run (nil at depth 0).
var depthTokens []int

// withDepth turns the prefix cache on for a run at depth > 0 and sizes
// the pool for the cached prefix too.
func withDepth(cfg *engine.Config, depth, nb int, perToken int64) error {
	if depth < 0 {
		return fmt.Errorf("run: -depth %d is negative", depth)
	}
	if depth == 0 {
		return nil
	}
	cfg.DisablePrefixCache = false
	cfg.KVMemory += int64(depth+64) * perToken
	return nil
}

// warmDepth makes the depth prefix and puts it in the prefix cache, with
// a request that is also the warm-up (first touch of the KV pages and of
// the batch's scratch buffers at the prompt length).
func warmDepth(e *engine.Engine, depth, npp int) error {
	vocab := e.ModelConfig().Vocab
	depthTokens = prompt(0x0d0d, depth, vocab)
	r, err := e.Generate(context.Background(), engine.Request{
		Tokens: append(append([]int(nil), depthTokens...), prompt(0x0e0e, npp, vocab)...), MaxTokens: 4, Tenant: "bench",
	})
	if err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	if e.Stats().Pool.PrefixLeases == 0 {
		return errors.New("run: -depth: the warm-up left nothing in the prefix cache")
	}
	return nil
}

// depthPrefix is a copy of the depth prefix, to start a timed request.
func depthPrefix(int) []int { return append([]int(nil), depthTokens...) }

// depthNote is the output's depth fields: the depth and the prompt tokens
// served from the prefix cache per timed request (n of them; the warm-up
// has none).
func depthNote(e *engine.Engine, depth, n int) string {
	if depth == 0 {
		return ""
	}
	return fmt.Sprintf(" depth=%d cached_tokens=%d", depth, int(e.Stats().CachedTokens)/max(n, 1))
}
