package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

func TestNewDefaultsBuiltinModel(t *testing.T) {
	e, err := New(Config{})
	require.NoError(t, err)
	defer e.Close()
	c := e.Config()
	require.Equal(t, "cpu", e.Device())
	require.Equal(t, DefaultPageSize, c.PageSize)
	require.Equal(t, DefaultMaxBatchTokens, c.MaxBatchTokens)
	// f16 KV; MaxSeqs contexts of the model (up to DefaultContext),
	// capped at DefaultKVMemory; MaxContext = min(model context, capacity).
	require.Equal(t, "f16", c.KVType)
	pb := kvcache.Geometry{PageSize: 16, Layers: 4, KVHeads: 4, HeadDim: 32, DType: device.F16}.PageBytes()
	mctx := model.DefaultConfig().MaxContext
	perSeq := (min(mctx, DefaultContext) + 15) / 16
	require.Equal(t, max(perSeq, min(perSeq*DefaultMaxSeqs, int(DefaultKVMemory/pb))), c.KVPages)
	require.Equal(t, min(mctx, c.KVPages*16), c.MaxContext)

	r, err := e.Generate(t.Context(), Request{Prompt: "Hello", MaxTokens: 8})
	require.NoError(t, err)
	require.Len(t, r.Tokens, 8)
	require.Equal(t, "length", r.FinishReason)
}

func TestNewDefaultMaxContextIsPoolWhenSmaller(t *testing.T) {
	e, err := New(Config{KVPages: 10, PageSize: 8})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, 80, e.MaxContext())
}

// Invariant 1, the incident's configuration: a context window larger than
// the pool refuses to start, and the error names both numbers.
func TestIncidentMaxContextAbovePoolRefusesToStart(t *testing.T) {
	_, err := New(Config{KVPages: 10, PageSize: 16, MaxContext: 161})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.Contains(t, err.Error(), "MaxContext 161")
	require.Contains(t, err.Error(), "160 tokens")

	e, err := New(Config{KVPages: 10, PageSize: 16, MaxContext: 160})
	require.NoError(t, err)
	require.NoError(t, e.Close())
}

func TestNewRejectsBadFields(t *testing.T) {
	cases := map[string]Config{
		"negative pages":      {KVPages: -1},
		"both pages and mem":  {KVPages: 4, KVMemory: 1 << 20},
		"page size":           {PageSize: 1 << 16},
		"negative ctx":        {MaxContext: -5},
		"negative batch":      {MaxBatchTokens: -1},
		"negative seqs":       {MaxSeqs: -1},
		"negative queue":      {MaxQueue: -1},
		"negative quota":      {TenantQuota: -1},
		"negative threads":    {Threads: -1},
		"too many threads":    {Threads: MaxThreads + 1},
		"negative host":       {HostTierBytes: -1},
		"compression no tier": {Compression: "zstd"},
		"bad compression":     {HostTierBytes: 1 << 20, Compression: "lz4"},
		"checksum":            {KVChecksum: Checksum(9)},
		"device":              {Device: "tpu"},
		"memory too small":    {KVMemory: 100},
		"tiny context":        {MaxContext: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(c)
			require.ErrorIs(t, err, ErrInvalidParams)
		})
	}
}

func TestNewCUDAUnavailable(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a CUDA driver is present; this test covers machines without one")
	}
	_, err := New(Config{Device: "cuda"})
	require.ErrorIs(t, err, device.ErrUnavailable)
	require.Contains(t, err.Error(), "no usable CUDA driver")
	require.Contains(t, err.Error(), "searched")

	// auto falls back to the CPU on a machine without a driver.
	e, err := New(Config{Device: "auto", KVPages: 8})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, "cpu", e.Device())
}

func TestParseChecksum(t *testing.T) {
	for _, s := range []string{"off", "handoff", "step"} {
		c, err := ParseChecksum(s)
		require.NoError(t, err)
		require.Equal(t, s, c.String())
	}
	_, err := ParseChecksum("always")
	require.ErrorIs(t, err, ErrInvalidParams)
}

func TestAdmissionRejections(t *testing.T) {
	cfg := echoConfig(t, 16, 4) // 64 tokens
	cfg.TenantQuota = 1
	hold, held := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	var once sync.Once
	cfg.th().Faults = &Faults{AbortAt: func(id uint64, st State) bool {
		if armed.Load() {
			once.Do(func() { close(held); <-hold })
		}
		return false
	}}
	e := newEcho(t, cfg)
	ctx := t.Context()

	_, err := e.Submit(ctx, Request{})
	require.ErrorIs(t, err, ErrEmptyPrompt)
	_, err = e.Submit(ctx, Request{Prompt: "a", Tokens: []int{5}})
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.Submit(ctx, Request{Tokens: []int{echoVocab}})
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.Submit(ctx, Request{Prompt: "a", MaxTokens: -2})
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.Submit(ctx, Request{Prompt: "a", Sampling: sample.Params{Temperature: -1}})
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = e.Submit(ctx, Request{Prompt: "a", Stop: make([]string, MaxStopStrings+1)})
	require.ErrorIs(t, err, ErrInvalidParams)

	_, err = e.Submit(ctx, Request{Prompt: strings.Repeat("x", 63)}) // + BOS = 64 = MaxContext
	var tooLong *PromptTooLongError
	require.ErrorAs(t, err, &tooLong)
	require.ErrorIs(t, err, ErrPromptTooLong)
	require.Equal(t, 64, tooLong.Prompt)
	require.Equal(t, 64, tooLong.Limit)
	require.Equal(t, 64+DefaultMaxTokens, tooLong.Requested, "requested is prompt + max tokens (the default here)")
	require.False(t, tooLong.AtLeast, "a prompt tokenized in full has an exact count")
	_, err = e.Submit(ctx, Request{Prompt: strings.Repeat("x", 70), MaxTokens: 5})
	require.ErrorAs(t, err, &tooLong)
	// Refused by its length alone: 70 bytes are at least 70 tokens.
	require.True(t, tooLong.AtLeast)
	require.Equal(t, 70, tooLong.Prompt)
	require.Equal(t, 70+5, tooLong.Requested)
	require.Contains(t, err.Error(), "at least 70")

	// Quota: one request in flight per tenant. The fault hook holds the
	// scheduler while the first request is in flight, so the second Submit
	// deterministically meets a full quota.
	armed.Store(true)
	st, err := e.Submit(ctx, Request{Prompt: "a", Tenant: "t1", MaxTokens: 50})
	require.NoError(t, err)
	<-held
	_, err = e.Submit(ctx, Request{Prompt: "b", Tenant: "t1"})
	require.ErrorIs(t, err, ErrQuotaExceeded)
	other, err := e.Submit(ctx, Request{Prompt: "c", Tenant: "t2", MaxTokens: 1})
	require.NoError(t, err, "the quota is per tenant")
	close(hold)
	require.NoError(t, st.Wait().Err)
	require.NoError(t, other.Wait().Err)
	_, err = e.Generate(ctx, Request{Prompt: "b", Tenant: "t1", MaxTokens: 2})
	require.NoError(t, err, "quota is released when a request ends")

	s := e.Stats()
	require.Equal(t, uint64(1), s.Rejected[RejectEmptyPrompt])
	require.Equal(t, uint64(2), s.Rejected[RejectPromptTooLong])
	require.Equal(t, uint64(5), s.Rejected[RejectInvalidParams])
	require.Equal(t, uint64(1), s.Rejected[RejectQuota])

	require.NoError(t, e.Close())
	_, err = e.Submit(ctx, Request{Prompt: "a"})
	require.ErrorIs(t, err, ErrClosed)
}

func TestOverloaded(t *testing.T) {
	cfg := echoConfig(t, 16, 4)
	cfg.MaxQueue = 2
	cfg.MaxSeqs = 1
	block, entered := make(chan struct{}), make(chan struct{}, 100)
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		r.afterStep = func(*model.Batch) { entered <- struct{}{}; <-block }
		return r, err
	}
	e := newEcho(t, cfg)
	var unblock sync.Once
	defer unblock.Do(func() { close(block) })
	var streams []*Stream
	// The first is scheduled (and blocks in its first step); the next two
	// fill the queue; the fourth is refused.
	st, err := e.Submit(t.Context(), Request{Prompt: "a", MaxTokens: 2})
	require.NoError(t, err)
	streams = append(streams, st)
	<-entered
	for range 2 {
		st, err := e.Submit(t.Context(), Request{Prompt: "a", MaxTokens: 2})
		require.NoError(t, err)
		streams = append(streams, st)
	}
	_, err = e.Submit(t.Context(), Request{Prompt: "a", MaxTokens: 2})
	require.ErrorIs(t, err, ErrOverloaded)
	unblock.Do(func() { close(block) })
	for _, st := range streams {
		require.NoError(t, st.Wait().Err)
	}
	require.Equal(t, uint64(1), e.Stats().Rejected[RejectOverloaded])
}

// The incident, end to end: an over-long prompt is rejected at admission,
// before any page is allocated, and produces no token.
func TestIncidentOverlongPromptRejectedBeforeAllocation(t *testing.T) {
	cfg := echoConfig(t, 8, 4) // 32 tokens
	e := newEcho(t, cfg)
	before := e.pool.Stats()
	prompt := tenantPrompt(1, 1, 40)
	st, err := e.Submit(t.Context(), Request{Tokens: prompt, MaxTokens: 1})
	require.Nil(t, st, "no stream, so no token can ever be produced")
	require.ErrorIs(t, err, ErrPromptTooLong)
	var tl *PromptTooLongError
	require.ErrorAs(t, err, &tl)
	require.Equal(t, 41, tl.Requested, "prompt 40 + max tokens 1")
	require.Equal(t, 40, tl.Prompt)
	require.Equal(t, 32, tl.Limit)
	time.Sleep(10 * time.Millisecond)
	after := e.pool.Stats()
	require.Equal(t, before.Allocs, after.Allocs, "no page allocated for a rejected request")
	require.Equal(t, 8, after.Free)
	s := e.Stats()
	require.Equal(t, uint64(0), s.Admitted)
	require.Equal(t, uint64(0), s.GeneratedTokens)
	require.Equal(t, uint64(0), s.Steps)

	// A prompt that fits with a huge MaxTokens is clamped, not rejected,
	// and ends with "length" exactly at MaxContext.
	p := tenantPrompt(1, 2, 20)
	r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 1000})
	require.NoError(t, err)
	want := echoOracle(p, 1000, 32, true)
	require.Equal(t, want, r.Tokens)
	if len(want) == 12 {
		require.Equal(t, "length", r.FinishReason)
	}
}

// The incident, end to end: a sequence that reserved pages it never wrote
// (8 reserved, 1 written) fails the handoff check, and the engine's handoff
// with the real scheduler accepts only written == expected.
func TestIncidentReservedUnwrittenFailsHandoff(t *testing.T) {
	cfg := echoConfig(t, 16, 4)
	e := newEcho(t, cfg)
	pool := e.pool
	tab := pool.NewTable(kvcache.RequestID(1<<40), "x")
	require.NoError(t, tab.Reserve(8*4))
	r, err := newEchoRunner(pool, true)
	require.NoError(t, err)
	b := &model.Batch{Seqs: []model.Seq{{Tokens: []int{1}, Table: tab}}}
	require.NoError(t, r.Forward(b))
	before := pool.Stats().IsolationViolations
	sc := &scheduler{e: e, pool: pool, ps: 4}
	err = sc.handoff(&seq{id: 1 << 40}, tab, 1)
	require.ErrorIs(t, err, ErrIsolation)
	require.ErrorIs(t, err, kvcache.ErrHandoff)
	require.Contains(t, err.Error(), "8 pages reserved, 1 written")
	require.Equal(t, before+1, pool.Stats().IsolationViolations)
	require.NoError(t, tab.Release())

	// Same with KVChecksum off: the count check stays.
	e.cfg.KVChecksum = ChecksumOff
	tab = pool.NewTable(kvcache.RequestID(1<<41), "x")
	require.NoError(t, tab.Reserve(8*4))
	require.NoError(t, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: []int{1}, Table: tab}}}))
	err = sc.handoff(&seq{id: 1 << 41}, tab, 1)
	require.ErrorIs(t, err, ErrIsolation)
	require.NoError(t, tab.Release())
}

func TestStreamEventsAndResult(t *testing.T) {
	e := newEcho(t, echoConfig(t, 64, 4))
	p := tenantPrompt(2, 7, 9)
	st, err := e.Submit(t.Context(), Request{Tokens: p, MaxTokens: 30})
	require.NoError(t, err)
	require.NotZero(t, st.ID())
	var toks []int
	var text strings.Builder
	var last Event
	for ev := range st.Events() {
		if !ev.Done {
			toks = append(toks, ev.Token)
		}
		text.WriteString(ev.Text)
		last = ev
	}
	require.True(t, last.Done)
	r := st.Wait()
	require.Equal(t, r, *last.Result)
	require.Equal(t, toks, r.Tokens)
	require.Equal(t, r.Text, text.String())
	require.Equal(t, echoOracle(p, 30, e.MaxContext(), true), toks)
	got, ok := st.Result()
	require.True(t, ok)
	require.Equal(t, r.ID, got.ID)

	// iter.Seq2 form.
	st, err = e.Submit(t.Context(), Request{Tokens: p, MaxTokens: 30})
	require.NoError(t, err)
	toks = toks[:0]
	for ev, err := range st.All() {
		require.NoError(t, err)
		if ev.Token >= 0 {
			toks = append(toks, ev.Token)
		}
	}
	require.Equal(t, echoOracle(p, 30, e.MaxContext(), true), toks)
}

func TestIDsNeverReused(t *testing.T) {
	e := newEcho(t, echoConfig(t, 64, 4))
	seen := map[uint64]bool{}
	for i := range 20 {
		r, err := e.Generate(t.Context(), Request{Tokens: tenantPrompt(1, i, 5), MaxTokens: 2})
		require.NoError(t, err)
		require.False(t, seen[r.ID])
		seen[r.ID] = true
	}
}

func TestContextCancelAborts(t *testing.T) {
	e := newEcho(t, noEOS(echoConfig(t, 64, 4)))
	ctx, cancel := context.WithCancel(t.Context())
	// The prefill step is held until the cancel has reached the engine, so
	// the request cannot run to its length first (no timing assumption).
	entered, release := holdNextStep(t, e)
	st, err := e.Submit(ctx, Request{Tokens: tenantPrompt(1, 1, 5), MaxTokens: 1 << 20})
	require.NoError(t, err)
	<-entered
	cancel()
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.aborts) > 0
	}, 10*time.Second, time.Millisecond, "the cancel never reached the engine")
	release()
	<-st.Events() // first token is out: it is decoding
	r := st.Wait()
	require.ErrorIs(t, r.Err, ErrAborted)
	require.ErrorIs(t, r.Err, context.Canceled)
	require.Equal(t, "abort", r.FinishReason)
	waitPoolIdle(t, e)
	require.ErrorIs(t, e.Abort(r.ID), ErrNotFound)
}

// waitPoolIdle waits until every page is free, quarantined or held only by
// the prefix cache, with no step or copy lease: nothing leaked.
func waitPoolIdle(t testing.TB, e *Engine) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := e.Stats()
		p := s.Pool
		return s.Running == 0 && s.Waiting == 0 && s.Swapped == 0 &&
			p.Owned == 0 && p.Sealed == 0 && p.StepLeases == 0 && p.CopyLeases == 0 &&
			p.PrefixLeases == s.PrefixEntries && p.Releasing <= s.PrefixEntries && // cache entries on quarantined pages hold leases too
			p.Free+p.Quarantined+p.Releasing == p.Pages &&
			// Host copies left are spilled prefix-cache entries.
			p.HostEntries == s.PrefixHostEntries && (p.HostEntries == 0) == (p.HostTierUsed == 0)
	}, 10*time.Second, time.Millisecond, "pool not idle: %+v", e.Stats())
}

func TestCloseAbortsAndFreesEverything(t *testing.T) {
	cfg := echoConfig(t, 32, 4)
	cfg.HostTierBytes = 1 << 20
	block := make(chan struct{})
	var once sync.Once
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		r.afterStep = func(*model.Batch) {
			if r.steps == 3 {
				once.Do(func() { <-block })
			}
		}
		return r, err
	}
	e, err := New(cfg)
	require.NoError(t, err)
	var streams []*Stream
	for i := range 10 {
		st, err := e.Submit(t.Context(), Request{Tokens: tenantPrompt(1, i, 10), MaxTokens: 100})
		require.NoError(t, err)
		streams = append(streams, st)
	}
	done := make(chan error)
	go func() { done <- e.Close() }()
	time.Sleep(5 * time.Millisecond)
	close(block)
	require.NoError(t, <-done)
	for _, st := range streams {
		r := st.Wait()
		if r.Err != nil {
			require.ErrorIs(t, r.Err, ErrAborted)
			require.ErrorIs(t, r.Err, ErrClosed)
		}
	}
	p := e.pool.Stats()
	require.Equal(t, p.Pages, p.Free, "every page back: %+v", p)
	require.Zero(t, p.PrefixLeases+p.StepLeases+p.CopyLeases)
	require.NoError(t, e.Close(), "idempotent")
	_, err = e.Generate(t.Context(), Request{Prompt: "x"})
	require.ErrorIs(t, err, ErrClosed)
}

func TestAbortUnknown(t *testing.T) {
	e := newEcho(t, echoConfig(t, 16, 4))
	require.ErrorIs(t, e.Abort(12345), ErrNotFound)
}

func ExampleEngine_Generate() {
	e, err := New(Config{KVPages: 64})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	r, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 4, Tenant: "acme"})
	fmt.Println(len(r.Tokens), r.FinishReason, err)
	// Output: 4 length <nil>
}

// A reader that sees the Done event can ask for the Result at once: the C
// API and the Python binding do exactly that.
func TestResultReadyAtDoneEvent(t *testing.T) {
	e := newEcho(t, echoConfig(t, 16, 4))
	for i := range 200 {
		st, err := e.Submit(t.Context(), Request{Tokens: tenantPrompt(1, i, 3), MaxTokens: 2})
		require.NoError(t, err)
		for ev := range st.Events() {
			if ev.Done {
				r, done := st.Result()
				require.True(t, done, "Result not ready when the Done event arrived")
				require.Equal(t, ev.Result.ID, r.ID)
			}
		}
	}
}

// The pool's numbers an application needs come from Config, not from the
// pool itself (which Engine does not hand out).
func TestConfigPoolNumbers(t *testing.T) {
	e, err := New(Config{KVPages: 10, PageSize: 8})
	require.NoError(t, err)
	defer e.Close()
	c := e.Config()
	require.Equal(t, 80, c.CapacityTokens())
	require.Equal(t, e.pool.CapacityTokens(), c.CapacityTokens())
	require.Equal(t, e.pool.Geometry().PageBytes(), c.PageBytes())
	require.Equal(t, e.Stats().Pool.Pages, c.KVPages)
	require.Zero(t, Config{}.PageBytes())
}
