package engine

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
)

// rssBytes reads the resident set size from /proc/self/statm.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(f), 2)
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// Closing an engine gives its KV pool back to the operating system at once
// (the arena is an anonymous mapping, unmapped on Close), so open/close
// cycles do not grow the process. Poison makes every page of the pool
// resident while the engine is open.
func TestCloseReturnsPoolMemory(t *testing.T) {
	const pool = 32 << 20
	w, tok, err := model.Open("", "") // the built-in model, loaded once
	require.NoError(t, err)
	defer w.Close()
	cycle := func() (open int64) {
		e, err := New(Config{Weights: w, Tokenizer: tok, Device: "cpu", KVMemory: pool, Poison: true})
		require.NoError(t, err)
		r, err := e.Generate(t.Context(), Request{Prompt: "Hello", MaxTokens: 2})
		require.NoError(t, err)
		require.Len(t, r.Tokens, 2)
		open = rssBytes(t)
		require.NoError(t, e.Close())
		return open
	}
	settle := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		return rssBytes(t)
	}
	for range 2 { // warm up: code, weights, scratch
		cycle()
	}
	base := settle()
	var maxOpen int64
	for range 10 {
		maxOpen = max(maxOpen, cycle())
		// Immediately after Close, before any garbage collection, the
		// pool's pages are gone from the resident set.
		closed := rssBytes(t)
		require.Less(t, closed, maxOpen-pool/2, "Close did not return the pool (open %d MiB, closed %d MiB)", maxOpen>>20, closed>>20)
	}
	after := settle()
	t.Logf("RSS: %d MiB before the cycles, %d MiB at most while open, %d MiB after 10 cycles", base>>20, maxOpen>>20, after>>20)
	require.Less(t, after, base+pool/2, "10 open/close cycles grew RSS from %d to %d MiB", base>>20, after>>20)
}
