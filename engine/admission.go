package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/engine/sample"
)

// admit is the only gate (invariant 2). It tokenizes and checks req and
// reserves its place in the tenant quota and the queue, all before any
// page is allocated or any compute is queued. A request it rejects never
// becomes a seq the scheduler can see.
//
// Sizing decision: a request is rejected only when its prompt alone does
// not leave room for one generated token (prompt >= MaxContext). MaxTokens
// beyond what the context has left is clamped, and such a request finishes
// with reason "length" when prompt plus generated tokens reach MaxContext,
// which is what clients of OpenAI-style servers expect from a long prompt
// with a generous max_tokens.
func (e *Engine) admit(req Request) (*seq, error) {
	s, reason, err := e.check(req)
	if err != nil {
		e.met.reject(reason)
		return nil, err
	}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		e.met.reject(RejectClosed)
		return nil, ErrClosed
	case e.cfg.TenantQuota > 0 && e.tenants[s.tenant] >= e.cfg.TenantQuota:
		n := e.tenants[s.tenant]
		e.mu.Unlock()
		e.met.reject(RejectQuota)
		return nil, fmt.Errorf("%w: tenant %q has %d requests in flight, quota is %d", ErrQuotaExceeded, s.tenant, n, e.cfg.TenantQuota)
	case e.queued >= e.cfg.MaxQueue:
		n := e.queued
		e.mu.Unlock()
		e.met.reject(RejectOverloaded)
		return nil, fmt.Errorf("%w: %d requests waiting, queue limit is %d", ErrOverloaded, n, e.cfg.MaxQueue)
	}
	e.tenants[s.tenant]++
	e.queued++
	// IDs are assigned only to admitted requests, from a 64-bit monotonic
	// counter, and never reused (invariant 7).
	s.id = e.nextID.Add(1)
	e.mu.Unlock()

	e.met.admit(len(s.prompt))
	return s, nil
}

// unadmit undoes admit for a request that never reached the scheduler.
func (e *Engine) unadmit(s *seq) {
	e.mu.Lock()
	if e.tenants[s.tenant]--; e.tenants[s.tenant] <= 0 {
		delete(e.tenants, s.tenant)
	}
	e.queued--
	e.mu.Unlock()
	e.met.end("abort", false)
}

// check validates req and builds its seq. It touches no shared state.
func (e *Engine) check(req Request) (*seq, string, error) {
	if req.Prompt == "" && len(req.Tokens) == 0 {
		return nil, RejectEmptyPrompt, fmt.Errorf("%w: request has neither prompt text nor tokens", ErrEmptyPrompt)
	}
	if req.Prompt != "" && len(req.Tokens) > 0 {
		return nil, RejectInvalidParams, fmt.Errorf("%w: request has both prompt text and tokens; give one", ErrInvalidParams)
	}
	if req.MaxTokens < 0 {
		return nil, RejectInvalidParams, fmt.Errorf("%w: max tokens %d is negative", ErrInvalidParams, req.MaxTokens)
	}
	params := req.Sampling
	if err := params.Validate(); err != nil {
		if !errors.Is(err, ErrInvalidParams) {
			err = fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
		return nil, RejectInvalidParams, err
	}
	if len(req.Stop) > MaxStopStrings {
		return nil, RejectInvalidParams, fmt.Errorf("%w: %d stop strings, at most %d", ErrInvalidParams, len(req.Stop), MaxStopStrings)
	}
	for i, st := range req.Stop {
		if len(st) > MaxStopLen {
			return nil, RejectInvalidParams, fmt.Errorf("%w: stop string %d is %d bytes, at most %d", ErrInvalidParams, i, len(st), MaxStopLen)
		}
	}
	if strings.ContainsRune(req.Tenant, 0) || len(req.Tenant) > 256 {
		return nil, RejectInvalidParams, fmt.Errorf("%w: tenant name must be at most 256 bytes without NUL", ErrInvalidParams)
	}

	var prompt []int
	if len(req.Tokens) > 0 {
		prompt = append([]int(nil), req.Tokens...)
		vocab := e.mcfg.Vocab
		for i, t := range prompt {
			if t < 0 || t >= vocab {
				return nil, RejectInvalidParams, fmt.Errorf("%w: token %d at position %d is outside the vocabulary of %d", ErrInvalidParams, t, i, vocab)
			}
		}
	} else {
		ids, err := e.encodePrompt(req.Prompt, !req.NoBOS, req.ParseSpecial)
		if err != nil {
			return nil, RejectInvalidParams, fmt.Errorf("%w: tokenizing the prompt: %w", ErrInvalidParams, err)
		}
		if len(ids) == 0 {
			return nil, RejectEmptyPrompt, fmt.Errorf("%w: the prompt tokenizes to nothing", ErrEmptyPrompt)
		}
		prompt = ids
	}
	maxTok := req.MaxTokens
	if maxTok == 0 {
		maxTok = DefaultMaxTokens
	}
	if n, limit := len(prompt), e.cfg.MaxContext; n >= limit {
		// Requested is what the request asked for (prompt + max tokens);
		// it is refused because the prompt alone leaves no room.
		return nil, RejectPromptTooLong, &PromptTooLongError{Requested: n + maxTok, Limit: limit, Prompt: n}
	}
	maxTok = min(maxTok, e.cfg.MaxContext-len(prompt))

	s := &seq{
		tenant:    req.Tenant,
		prompt:    prompt,
		maxTokens: maxTok,
		params:    params,
		stops:     req.Stop,
		state:     StateWaiting,
		submitted: time.Now(),
	}
	s.tokens = make([]int, len(prompt), len(prompt)+maxTok)
	copy(s.tokens, prompt)
	return s, "", nil
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
