package engine

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestZeroOnReleaseScrubsHostTier (issue 25 item 7), end to end: with
// ZeroOnRelease, a prefix spilled to the host tier and restored on a hit,
// and a sequence swapped out and back in, leave no host buffer with KV
// bytes in it once the engine is done with them; without the flag the
// same buffers keep their bytes (the control: the hook sees real data).
func TestZeroOnReleaseScrubsHostTier(t *testing.T) {
	for _, zero := range []bool{true, false} {
		for _, comp := range []string{"none", "zstd"} {
			t.Run(comp+map[bool]string{true: "/zero_on_release", false: "/off"}[zero], func(t *testing.T) {
				var mu sync.Mutex
				var bufs [][]byte
				kinds := map[string]int{}
				hooks := &kvcache.Faults{DroppedHost: func(what string, b []byte) {
					mu.Lock()
					defer mu.Unlock()
					bufs = append(bufs, b)
					kinds[what]++
				}}

				// Prefix spill and a hit restored from the host tier.
				cfg := hostSpillConfig(t)
				cfg.Poison, cfg.ZeroOnRelease, cfg.Compression = false, zero, comp
				cfg.th().Faults = &Faults{Pool: hooks}
				e := newEcho(t, cfg)
				a, b := sharedPair()
				_, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
				require.NoError(t, err)
				spillAll(t, e, "other", 2)
				rb, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
				require.NoError(t, err)
				require.Equal(t, 16, rb.CachedTokens, "restored from the host tier")
				waitPoolIdle(t, e)
				requireNoLeaks(t, e)

				// Preemption by swap.
				cfg = pressureConfig(t, true)
				cfg.Poison, cfg.ZeroOnRelease, cfg.Compression = false, zero, comp
				cfg.th().Faults = &Faults{Pool: hooks}
				e = newEcho(t, cfg)
				ra, rb2 := runPair(t, e)
				require.NoError(t, ra.Err)
				require.NoError(t, rb2.Err)
				require.NotZero(t, e.Stats().SwapOuts)
				waitPoolIdle(t, e)
				requireNoLeaks(t, e)

				mu.Lock()
				defer mu.Unlock()
				require.Positive(t, kinds["host copy"], "%v", kinds)
				dirty := 0
				for _, b := range bufs {
					for _, c := range b {
						if c != 0 {
							dirty++
							break
						}
					}
				}
				if zero {
					require.Zero(t, dirty, "of %d host buffers (%v)", len(bufs), kinds)
				} else {
					require.Positive(t, dirty, "control: %v", kinds)
				}
			})
		}
	}
}
