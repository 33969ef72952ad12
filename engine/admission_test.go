package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// countingTok counts what admission gives the tokenizer: calls and bytes.
// With bound false it gives no MinTokens bound (a tokenizer that drops
// bytes, or one from outside this module), so every prompt is tokenized,
// though only up to the limit.
type countingTok struct {
	tokenizer.Tokenizer
	bound        bool
	calls, bytes atomic.Int64
	block        map[int]chan struct{} // a call on a text of n bytes waits on block[n]
	inside       atomic.Int64          // bytes being tokenized now
	entered      chan int              // the size of each call, as it starts (when set)
}

func (c *countingTok) note(text string) func() {
	c.calls.Add(1)
	c.bytes.Add(int64(len(text)))
	c.inside.Add(int64(len(text)))
	if c.entered != nil {
		c.entered <- len(text)
	}
	if ch := c.block[len(text)]; ch != nil {
		<-ch
	}
	return func() { c.inside.Add(-int64(len(text))) }
}

func (c *countingTok) Encode(text string, opt tokenizer.Options) ([]int, error) {
	defer c.note(text)()
	return c.Tokenizer.Encode(text, opt)
}

func (c *countingTok) EncodeLimit(text string, opt tokenizer.Options, limit int) ([]int, error) {
	defer c.note(text)()
	return tokenizer.EncodeLimit(c.Tokenizer, text, opt, limit)
}

func (c *countingTok) MinTokens(text string) int {
	if !c.bound {
		return 0
	}
	return tokenizer.MinTokens(c.Tokenizer, text)
}

// allocated returns the bytes f allocated (the scheduler idles meanwhile).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLongPromptRefusedCheaply: a 1 MiB prompt on a 64-token context is
// refused with ErrPromptTooLong without being tokenized when its length
// proves it cannot fit, and after at most the limit otherwise; either way
// refusing it allocates a few KB, where tokenizing it in full allocated
// 8 MiB (the built-in byte tokenizer's ids) and more.
func TestLongPromptRefusedCheaply(t *testing.T) {
	prompt := strings.Repeat("a", 1<<20)
	for _, tc := range []struct {
		name  string
		bound bool
		calls int64
	}{
		{"length bound", true, 0},
		{"no length bound", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := echoConfig(t, 16, 4) // MaxContext 64
			tok := &countingTok{Tokenizer: tokenizer.NewBytes(), bound: tc.bound}
			cfg.Tokenizer = tok
			e := newEcho(t, cfg)
			var err error
			bytes := allocated(func() { _, err = e.Submit(t.Context(), Request{Prompt: prompt, MaxTokens: 8}) })
			t.Logf("refusing a 1 MiB prompt allocated %d bytes", bytes)
			var tooLong *PromptTooLongError
			require.ErrorAs(t, err, &tooLong)
			require.ErrorIs(t, err, ErrPromptTooLong)
			require.True(t, tooLong.AtLeast)
			require.GreaterOrEqual(t, tooLong.Prompt, 64)
			require.LessOrEqual(t, tooLong.Prompt, 1<<20+1) // BOS
			require.Equal(t, 64, tooLong.Limit)
			require.Equal(t, tooLong.Prompt+8, tooLong.Requested)
			require.Equal(t, tc.calls, tok.calls.Load(), "tokenizer calls")
			require.Less(t, bytes, uint64(256<<10), "bytes allocated to refuse a 1 MiB prompt")
			require.Equal(t, uint64(1), e.Stats().Rejected[RejectPromptTooLong])
		})
	}
}

// TestQuotaAndQueueRefuseBeforeTokenizing: a request over its tenant's
// quota or over the queue limit is refused before its prompt is tokenized.
func TestQuotaAndQueueRefuseBeforeTokenizing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mut    func(*Config)
		want   error
		reason string
	}{
		{"quota", func(c *Config) { c.TenantQuota = 1 }, ErrQuotaExceeded, RejectQuota},
		{"queue", func(c *Config) { c.MaxQueue = 1 }, ErrOverloaded, RejectOverloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := echoConfig(t, 16, 4)
			tc.mut(&cfg)
			tok := &countingTok{Tokenizer: tokenizer.NewBytes(), bound: true}
			cfg.Tokenizer = tok
			// The scheduler is held at the first request's first state
			// change: it stays queued and in flight.
			gate := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(gate) }) }
			cfg.th().Faults = &Faults{AbortAt: func(uint64, State) bool { <-gate; return false }}
			e := newEcho(t, cfg)
			t.Cleanup(release)

			first, err := e.Submit(t.Context(), Request{Prompt: "a", Tenant: "t", MaxTokens: 1})
			require.NoError(t, err)
			require.Equal(t, int64(1), tok.calls.Load())
			for _, p := range []string{"b", strings.Repeat("c", 60), strings.Repeat("d", 1<<20)} {
				_, err = e.Submit(t.Context(), Request{Prompt: p, Tenant: "t", MaxTokens: 1})
				require.ErrorIs(t, err, tc.want)
			}
			require.Equal(t, int64(1), tok.calls.Load(), "refused requests were tokenized")
			require.Equal(t, uint64(3), e.Stats().Rejected[tc.reason])
			release()
			require.NoError(t, first.Wait().Err)
		})
	}
}

// TestTokenizingBytesBounded: the prompt bytes being tokenized at once are
// bounded across requests; the others wait their turn (in their own
// goroutines), a short prompt does not wait behind long ones, and a
// cancelled wait gives up cleanly.
func TestTokenizingBytesBounded(t *testing.T) {
	cfg := echoConfig(t, 64, 16) // MaxContext 1024
	tok := &countingTok{Tokenizer: tokenizer.NewBytes(), bound: true, entered: make(chan int, 8),
		block: map[int]chan struct{}{600: make(chan struct{}), 90: make(chan struct{})}}
	cfg.Tokenizer = tok
	e := newEcho(t, cfg)
	// Lanes scaled down: prompts up to 100 bytes share 150, longer ones 1000.
	short, long := newByteGate(150, 100), newByteGate(1000, math.MaxInt64)
	e.tokGates = []*byteGate{short, long}

	errs := make(chan error, 8)
	submit := func(ctx context.Context, n int) {
		go func() {
			_, err := e.Generate(ctx, Request{Prompt: strings.Repeat("p", n), MaxTokens: 1})
			errs <- err
		}()
	}
	const n = 3
	for range n {
		submit(context.Background(), 600)
	}
	require.Equal(t, 600, <-tok.entered)
	waitGate(t, long, n-1)
	require.Equal(t, int64(600), tok.inside.Load(), "600 + 600 bytes exceed the lane's 1000")

	// A short prompt goes ahead in its own lane, and one more waits there.
	submit(context.Background(), 90)
	require.Equal(t, 90, <-tok.entered)
	require.Equal(t, int64(690), tok.inside.Load())
	ctx, cancel := context.WithCancel(context.Background())
	submit(ctx, 80)
	waitGate(t, short, 1)
	// A waiter whose context ends leaves the line.
	cancel()
	require.ErrorIs(t, <-errs, ErrAborted)
	waitGate(t, short, 0)
	tok.block[90] <- struct{}{}
	require.NoError(t, <-errs)

	for i := range n {
		if i > 0 {
			require.Equal(t, 600, <-tok.entered)
		}
		require.Equal(t, int64(600), tok.inside.Load())
		tok.block[600] <- struct{}{}
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for _, g := range e.tokGates {
		g.mu.Lock()
		require.Zero(t, g.used)
		require.Zero(t, g.waiters.Len())
		g.mu.Unlock()
	}
}

// waitGate waits until n requests wait at g (a state, not a duration).
func waitGate(t *testing.T, g *byteGate, n int) {
	t.Helper()
	for {
		g.mu.Lock()
		w := g.waiters.Len()
		g.mu.Unlock()
		if w == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPromptsAtTheLimitAgree: admission never refuses a prompt that fits,
// nor admits one that does not, and an admitted prompt's tokens are the
// full tokenization's: random prompts around MaxContext on the built-in
// model (bytes) and, when present, stories260K's SentencePiece vocabulary.
func TestPromptsAtTheLimitAgree(t *testing.T) {
	const limit = 48
	engines := map[string]func(t *testing.T) *Engine{
		"built-in": func(t *testing.T) *Engine {
			e, err := New(Config{KVPages: 64, PageSize: 4, MaxContext: limit, MaxSeqs: 4})
			require.NoError(t, err)
			t.Cleanup(func() { closeClean(t, e) })
			return e
		},
		"stories260K": func(t *testing.T) *Engine {
			return storiesEngine(t, modelsDir(t), func(c *Config) { c.MaxContext = limit })
		},
	}
	words := []string{"a", "b", "Once", " upon", " a", " time", ",", " the", " little", " dog", ".", "\n", " ", "é", "日本", "😀", "<s>", "</s>", "<0x41>", "\x01", "  "}
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			e := open(t)
			rng := rand.New(rand.NewPCG(7, 8))
			fit, refused := 0, 0
			for range 120 {
				special, noBOS := rng.IntN(2) == 0, rng.IntN(4) == 0
				// Grow a prompt until its full tokenization is near the limit.
				var text string
				var full []int
				target := limit - 3 + rng.IntN(6)
				for len(full) < target {
					text += words[rng.IntN(len(words))]
					var err error
					full, err = e.encodePrompt(text, !noBOS, special)
					require.NoError(t, err)
				}
				res, err := e.Generate(t.Context(), Request{Prompt: text, MaxTokens: 1, NoBOS: noBOS, ParseSpecial: special})
				if len(full) < limit {
					require.NoError(t, err, "%q: %d tokens fit a context of %d", text, len(full), limit)
					require.Equal(t, full, res.PromptTokens, "%q", text)
					fit++
					continue
				}
				var tooLong *PromptTooLongError
				require.ErrorAs(t, err, &tooLong, "%q: %d tokens", text, len(full))
				require.GreaterOrEqual(t, tooLong.Prompt, limit)
				require.LessOrEqual(t, tooLong.Prompt, len(full))
				if !tooLong.AtLeast {
					require.Equal(t, len(full), tooLong.Prompt)
				}
				refused++
			}
			require.Greater(t, fit, 20)
			require.Greater(t, refused, 20)
		})
	}
}
