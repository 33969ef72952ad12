package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// admit is the only gate (invariant 2). It checks req, reserves its place
// in the tenant quota and the queue, and only then tokenizes it, all before
// any page is allocated or any compute is queued. A request it rejects
// never becomes a seq the scheduler can see.
//
// Tokenizing is what a hostile prompt makes expensive, so it comes last
// and is bounded three ways: quota and queue refuse a flood before any of
// it is tokenized; a prompt whose bytes alone prove it cannot fit
// (tokenizer.MinTokens) is refused without tokenizing; the rest is
// tokenized under a gate (a bound on the prompt bytes being tokenized at
// once) and only until it is known not to fit (tokenizer.EncodeLimit).
// Only the submitting goroutine waits at a gate, never the scheduler, and
// a short prompt never waits behind long ones (tokGates).
//
// Sizing decision: a request is rejected only when its prompt alone does
// not leave room for one generated token (prompt >= MaxContext). MaxTokens
// beyond what the context has left is clamped, and such a request finishes
// with reason "length" when prompt plus generated tokens reach MaxContext,
// which is what clients of OpenAI-style servers expect from a long prompt
// with a generous max_tokens.
func (e *Engine) admit(ctx context.Context, req Request) (*seq, error) {
	if reason, err := e.validate(req); err != nil {
		e.met.reject(reason)
		return nil, err
	}
	if err := e.reserve(req.Tenant); err != nil {
		return nil, err
	}
	s, reason, err := e.build(ctx, req)
	if err != nil {
		e.unreserve(req.Tenant)
		if reason != "" {
			e.met.reject(reason)
		}
		return nil, err
	}
	// IDs are assigned only to admitted requests, from a 64-bit monotonic
	// counter, and never reused (invariant 7).
	s.id = e.nextID.Add(1)
	e.met.admit(len(s.prompt))
	return s, nil
}

// reserve takes a place in tenant's quota and in the queue, or refuses.
func (e *Engine) reserve(tenant string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		e.met.reject(RejectClosed)
		return ErrClosed
	case e.cfg.TenantQuota > 0 && e.tenants[tenant] >= e.cfg.TenantQuota:
		e.met.reject(RejectQuota)
		return fmt.Errorf("%w: tenant %q has %d requests in flight, quota is %d", ErrQuotaExceeded, tenant, e.tenants[tenant], e.cfg.TenantQuota)
	case e.queued >= e.cfg.MaxQueue:
		e.met.reject(RejectOverloaded)
		return fmt.Errorf("%w: %d requests waiting, queue limit is %d", ErrOverloaded, e.queued, e.cfg.MaxQueue)
	}
	e.tenants[tenant]++
	e.queued++
	return nil
}

// unreserve gives back what reserve took.
func (e *Engine) unreserve(tenant string) {
	e.mu.Lock()
	if e.tenants[tenant]--; e.tenants[tenant] <= 0 {
		delete(e.tenants, tenant)
	}
	e.queued--
	e.mu.Unlock()
}

// unadmit undoes admit for a request that never reached the scheduler.
func (e *Engine) unadmit(s *seq) {
	e.unreserve(s.tenant)
	e.met.end("abort", false)
}

// validate checks what needs no tokenizing. It touches no shared state.
func (e *Engine) validate(req Request) (string, error) {
	if req.Prompt == "" && len(req.Tokens) == 0 && req.embed == nil {
		return RejectEmptyPrompt, fmt.Errorf("%w: request has neither prompt text nor tokens", ErrEmptyPrompt)
	}
	if req.embed == nil && e.weights.IsEncoder() {
		return RejectInvalidParams, fmt.Errorf("%w: the model is an encoder (%s): it computes embeddings (Engine.Embed) and cannot generate", ErrInvalidParams, e.mcfg.Arch)
	}
	if req.Prompt != "" && len(req.Tokens) > 0 {
		return RejectInvalidParams, fmt.Errorf("%w: request has both prompt text and tokens; give one", ErrInvalidParams)
	}
	if req.MaxTokens < 0 && req.MaxTokens != MaxTokensUntilEnd {
		return RejectInvalidParams, fmt.Errorf("%w: max tokens %d is negative (%d, MaxTokensUntilEnd, means until the end of generation or context)", ErrInvalidParams, req.MaxTokens, MaxTokensUntilEnd)
	}
	if err := req.Sampling.Validate(); err != nil {
		if !errors.Is(err, ErrInvalidParams) {
			err = fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
		return RejectInvalidParams, err
	}
	if len(req.Stop) > MaxStopStrings {
		return RejectInvalidParams, fmt.Errorf("%w: %d stop strings, at most %d", ErrInvalidParams, len(req.Stop), MaxStopStrings)
	}
	for i, st := range req.Stop {
		if len(st) > MaxStopLen {
			return RejectInvalidParams, fmt.Errorf("%w: stop string %d is %d bytes, at most %d", ErrInvalidParams, i, len(st), MaxStopLen)
		}
	}
	if strings.ContainsRune(req.Tenant, 0) || len(req.Tenant) > 256 {
		return RejectInvalidParams, fmt.Errorf("%w: tenant name must be at most 256 bytes without NUL", ErrInvalidParams)
	}
	vocab := e.mcfg.Vocab
	if err := checkLogitBias(req.Sampling, vocab); err != nil {
		return RejectInvalidParams, err
	}
	for i, t := range req.Tokens {
		if t < 0 || t >= vocab {
			return RejectInvalidParams, fmt.Errorf("%w: token %d at position %d is outside the vocabulary of %d", ErrInvalidParams, t, i, vocab)
		}
	}
	return "", nil
}

// build tokenizes req's prompt and builds its seq. It touches no shared
// state but the tokenizing gate. An empty reason with an error means the
// request was cancelled while it waited at the gate.
func (e *Engine) build(ctx context.Context, req Request) (*seq, string, error) {
	if req.embed != nil {
		return e.buildEmbed(ctx, req)
	}
	reqMax, maxTok := req.MaxTokens, req.MaxTokens
	limit := e.cfg.MaxContext
	switch maxTok {
	case 0:
		maxTok = DefaultMaxTokens
	case MaxTokensUntilEnd:
		maxTok = limit // clamped below to what the prompt leaves
	}
	tooLong := func(n int, atLeast bool) (*seq, string, error) {
		// Requested is what the request asked for (prompt + max tokens);
		// it is refused because the prompt alone leaves no room.
		req := n + maxTok
		if reqMax == MaxTokensUntilEnd {
			req = n + 1 // at least one token
		}
		return nil, RejectPromptTooLong, &PromptTooLongError{Requested: req, Limit: limit, Prompt: n, AtLeast: atLeast}
	}
	var prompt []int
	if len(req.Tokens) > 0 {
		if n := len(req.Tokens); n >= limit {
			return tooLong(n, false)
		}
		prompt = append([]int(nil), req.Tokens...)
	} else {
		// The prompt may hold limit-1 tokens, BOS included (encodePrompt
		// adds it to what the tokenizer gives).
		if n := tokenizer.MinTokens(e.tok, req.Prompt); n >= limit {
			return tooLong(n, true)
		}
		release, err := e.tokGateFor(len(req.Prompt)).acquire(ctx, int64(len(req.Prompt)))
		if err != nil {
			return nil, "", fmt.Errorf("%w: while waiting to tokenize the prompt: %w", ErrAborted, err)
		}
		ids, err := e.encodePromptLimit(req.Prompt, !req.NoBOS, req.ParseSpecial, limit-1)
		release()
		if le := (*tokenizer.LimitError)(nil); errors.As(err, &le) {
			return tooLong(le.AtLeast, true)
		}
		if err != nil {
			return nil, RejectInvalidParams, fmt.Errorf("%w: tokenizing the prompt: %w", ErrInvalidParams, err)
		}
		if len(ids) == 0 {
			return nil, RejectEmptyPrompt, fmt.Errorf("%w: the prompt tokenizes to nothing", ErrEmptyPrompt)
		}
		prompt = ids
	}
	if n := len(prompt); n >= limit {
		return tooLong(n, false)
	}
	maxTok = min(maxTok, limit-len(prompt))

	s := &seq{
		tenant:    req.Tenant,
		prompt:    prompt,
		maxTokens: maxTok,
		params:    req.Sampling,
		stops:     req.Stop,
		keep:      e.keepTokens(req.KeepTokens),
		state:     StateWaiting,
		submitted: time.Now(),
	}
	s.tokens = make([]int, len(prompt), len(prompt)+maxTok)
	copy(s.tokens, prompt)
	return s, "", nil
}

// The prompt bytes being tokenized at once, across all requests, are
// bounded: tokenizing takes some 30-60 bytes of memory per prompt byte, so
// a burst of long prompts stays within a few hundred MB. Prompts up to
// shortPrompt bytes have a lane (gate) of their own, so that a short
// prompt never waits behind long ones; each lane is first come, first
// served, and a prompt longer than its lane is tokenized alone in it.
const (
	shortPrompt    = 64 << 10
	shortLaneBytes = 1 << 20
	longLaneBytes  = 4 << 20
)

func newTokGates() []*byteGate {
	return []*byteGate{newByteGate(shortLaneBytes, shortPrompt), newByteGate(longLaneBytes, math.MaxInt64)}
}

// tokGateFor is the gate of a prompt of n bytes: the first lane it fits.
func (e *Engine) tokGateFor(n int) *byteGate {
	for _, g := range e.tokGates {
		if int64(n) <= g.upTo {
			return g
		}
	}
	return e.tokGates[len(e.tokGates)-1]
}

// byteGate is a FIFO weighted semaphore over bytes, the lane of prompts
// up to upTo bytes.
type byteGate struct {
	mu      sync.Mutex
	size    int64
	upTo    int64
	used    int64
	waiters list.List // of *gateWaiter, first come first served
}

type gateWaiter struct {
	n     int64
	ready chan struct{} // closed when granted
}

func newByteGate(size, upTo int64) *byteGate { return &byteGate{size: size, upTo: upTo} }

// acquire waits until n bytes (at most the gate's size) are free, or ctx
// ends. It returns the function that gives them back.
func (g *byteGate) acquire(ctx context.Context, n int64) (func(), error) {
	n = min(max(n, 1), g.size)
	var once sync.Once
	release := func() { once.Do(func() { g.release(n) }) }
	g.mu.Lock()
	if g.waiters.Len() == 0 && g.used+n <= g.size {
		g.used += n
		g.mu.Unlock()
		return release, nil
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	el := g.waiters.PushBack(w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-w.ready:
		// Granted as ctx ended: give the bytes back.
		g.mu.Unlock()
		release()
	default:
		g.waiters.Remove(el)
		g.grant() // the next in line may fit now
		g.mu.Unlock()
	}
	return nil, context.Cause(ctx)
}

func (g *byteGate) release(n int64) {
	g.mu.Lock()
	g.used -= n
	g.grant()
	g.mu.Unlock()
}

// grant lets waiters in, in order, while their bytes fit. g.mu is held.
func (g *byteGate) grant() {
	for el := g.waiters.Front(); el != nil; el = g.waiters.Front() {
		w := el.Value.(*gateWaiter)
		if g.used+w.n > g.size {
			return
		}
		g.used += w.n
		g.waiters.Remove(el)
		close(w.ready)
	}
}

// samplerFor builds the request's own sampler, seeded per request: the
// request's seed when it gives one, otherwise one derived from its ID, so
// no two requests share random state.
func samplerFor(p sample.Params, id uint64) *sample.Sampler {
	if !p.HasSeed {
		p.Seed = id*0x9E3779B97F4A7C15 + 1
	}
	return sample.New(p)
}
