package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// requirePagesFree checks, right after a request's Wait, that it holds no
// page: the scheduler releases a request's pages before it publishes the
// result, so no polling is needed (the prefix cache is off, so nothing
// keeps a page on purpose).
func requirePagesFree(t *testing.T, e *Engine) {
	t.Helper()
	p := e.Stats().Pool
	require.Zero(t, p.Owned, "owned pages: %+v", p)
	require.Zero(t, p.Sealed, "sealed pages: %+v", p)
	require.Zero(t, p.StepLeases, "step leases: %+v", p)
	require.Equal(t, p.Pages, p.Free, "pages not back on the free list: %+v", p)
}

// gatedEcho is an echo engine (no EOS, no prefix cache) whose forward
// pass holds at the end of step at until release is closed.
func gatedEcho(t *testing.T, at int) (*Engine, chan struct{}) {
	release := make(chan struct{})
	cfg := echoConfig(t, 64, 4)
	cfg.DisablePrefixCache = true
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		r.afterStep = func(*model.Batch) {
			if r.steps == at {
				<-release
			}
		}
		return r, err
	}
	return newEcho(t, cfg), release
}

func TestStreamBreakOutOfAllAborts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int // tokens read before the break
	}{
		{"first token", 1},
		{"after a few", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The forward pass holds at the step after the one that made
			// the token the loop breaks at, until the loop has broken out:
			// the request cannot run to its end first.
			e, release := gatedEcho(t, tc.after+1)
			st, err := e.Submit(context.Background(), Request{Tokens: tenantPrompt(1, tc.after, 9), MaxTokens: MaxTokensUntilEnd})
			require.NoError(t, err)
			n := 0
			for ev, err := range st.All() {
				require.NoError(t, err)
				require.False(t, ev.Done)
				if n++; n == tc.after {
					break
				}
			}
			close(release)
			r := st.Wait()
			require.ErrorIs(t, r.Err, ErrAborted)
			require.Equal(t, "abort", r.FinishReason)
			require.LessOrEqual(t, len(r.Tokens), tc.after+2)
			requirePagesFree(t, e)
			require.ErrorIs(t, e.Abort(st.ID()), ErrNotFound)
		})
	}
}

func TestStreamCloseWithoutReading(t *testing.T) {
	e, release := gatedEcho(t, 1)
	// The submitting context is cancelled and nobody reads the events:
	// Close ends delivery at once instead of after the 5 s grace.
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, Request{Tokens: tenantPrompt(2, 1, 9), MaxTokens: MaxTokensUntilEnd})
	require.NoError(t, err)
	ch := st.Events()
	cancel()
	st.Close()
	close(release)
	for range ch { // closed by Close, not by the grace timer
	}
	r := st.Wait()
	require.ErrorIs(t, r.Err, ErrAborted)
	requirePagesFree(t, e)
	st.Close() // idempotent
}

func TestStreamCloseAfterEnd(t *testing.T) {
	e := newEcho(t, echoConfig(t, 64, 4))
	st, err := e.Submit(context.Background(), Request{Tokens: tenantPrompt(3, 1, 9), MaxTokens: 3})
	require.NoError(t, err)
	r := st.Wait()
	st.Close()
	require.NoError(t, r.Err)
	r2 := st.Wait()
	require.Equal(t, r.FinishReason, r2.FinishReason, "Close after the end keeps the outcome")
	require.Len(t, r2.Tokens, 3)
}

func TestMaxTokensMeaning(t *testing.T) {
	cfg := noEOS(echoConfig(t, 64, 4))
	e := newEcho(t, cfg)
	prompt := tenantPrompt(4, 1, 9)
	for _, tc := range []struct {
		name    string
		max     int
		want    int // generated tokens
		wantErr error
	}{
		{"zero is the default", 0, min(DefaultMaxTokens, e.MaxContext()-len(prompt)), nil},
		{"until end fills the context", MaxTokensUntilEnd, e.MaxContext() - len(prompt), nil},
		{"explicit", 7, 7, nil},
		{"other negatives refused", -2, 0, ErrInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: tc.max})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), "MaxTokensUntilEnd")
				return
			}
			require.NoError(t, err)
			require.Len(t, r.Tokens, tc.want)
			require.Equal(t, "length", r.FinishReason)
		})
	}
}

func TestMaxTokensUntilEndTooLong(t *testing.T) {
	e := newEcho(t, echoConfig(t, 8, 4))
	prompt := tenantPrompt(5, 1, e.MaxContext())
	_, err := e.Submit(context.Background(), Request{Tokens: prompt, MaxTokens: MaxTokensUntilEnd})
	var tl *PromptTooLongError
	require.ErrorAs(t, err, &tl)
	require.Equal(t, len(prompt)+1, tl.Requested)
}
