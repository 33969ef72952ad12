package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kvwarden/kvwarden/engine/grammar"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Defaults of Config fields left zero.
const (
	DefaultPageSize = kvcache.DefaultPageSize
	// DefaultKVMemory caps the default KV pool: without KVPages or
	// KVMemory the pool holds MaxSeqs sequences of the context (MaxContext,
	// else the model's context up to DefaultContext), but no more than
	// this many bytes unless one context alone needs more.
	DefaultKVMemory = 256 << 20
	// DefaultContext bounds the context the default pool is sized for when
	// neither MaxContext nor a pool size is given.
	DefaultContext = 4096
	// DefaultKVType is the KV cache element type when KVType is "".
	DefaultKVType         = "f16"
	DefaultMaxBatchTokens = 512
	DefaultMaxSeqs        = 64
	DefaultMaxQueue       = 1024
	// DefaultMaxTokens is what Request.MaxTokens 0 asks for.
	DefaultMaxTokens = 128
	// MaxTokensUntilEnd as Request.MaxTokens generates until the model
	// ends generation (EOS, a stop string) or the request reaches
	// MaxContext.
	MaxTokensUntilEnd = -1
	// MaxStopStrings and MaxStopLen bound Request.Stop.
	MaxStopStrings = 16
	MaxStopLen     = 256
)

// Engine serves generation requests from many tenants over one model and
// one KV page pool. All methods are safe for concurrent use.
//
// One goroutine, the scheduler, owns every piece of scheduling state
// (queues, page tables, samplers, text streams); Submit, Abort and Close
// talk to it through a mutex-guarded inbox and a wake channel.
type Engine struct {
	hooks   TestHooks // tests only (WithTestHooks)
	cfg     Config    // resolved
	log     *slog.Logger
	tok     tokenizer.Tokenizer
	weights *model.Weights
	ownW    bool // the engine loaded the weights and closes them
	mcfg    model.Config
	pool    *kvcache.Pool
	runner  Runner
	eos     []int // end-of-generation ids
	chat    *chatTemplates
	backend string
	mfacts  modelFacts // metadata and fingerprint, on first use (metadata.go)
	tiers   tiers      // sealing keys and erasure (tiers.go)

	// The vocabulary as grammar matchers see it, on first use (grammar.go).
	gvOnce sync.Once
	gv     *grammar.Vocab
	gvErr  error

	spec  *Speculative // Config.Speculative resolved; nil = off (spec.go)
	draft *draftModel  // SpecDraft's model, nil without one (specdraft.go)

	sched  *scheduler // owned by its goroutine; tests peek while idle
	nextID atomic.Uint64
	met    *metrics
	// tokGates bound the prompt bytes being tokenized at once (admit):
	// one lane for short prompts, one for long ones.
	tokGates []*byteGate

	mu       sync.Mutex
	closed   bool
	inbox    []*seq
	aborts   []abortMsg
	live     map[uint64]*seq // admitted, not yet ended
	tenants  map[string]int  // live requests per tenant
	queued   int             // admitted, never scheduled yet
	wake     chan struct{}
	loopDone chan struct{}
	closeErr error
}

type abortMsg struct {
	id  uint64
	err error
}

// New builds an engine: resolves the model, device and pool from cfg,
// checks every field (errors wrap ErrInvalidParams, or name both numbers
// when MaxContext exceeds the pool: invariant 1) and starts the scheduler.
func New(cfg Config, opts ...Option) (*Engine, error) {
	var o options
	if cfg.hooks != nil {
		o.hooks = *cfg.hooks
	}
	for _, opt := range opts {
		opt(&o)
	}
	r, err := resolve(cfg, o.hooks)
	if err != nil {
		return nil, err
	}
	ml.SetThreads(r.cfg.Threads)
	e := &Engine{
		cfg: r.cfg, hooks: o.hooks, log: r.cfg.Logger, tok: r.tok, weights: r.weights, ownW: r.ownWeights,
		mcfg: r.weights.Config, chat: r.chat, pool: r.pool, runner: r.runner, backend: r.backend,
		met: newMetrics(), tokGates: newTokGates(), live: map[uint64]*seq{}, tenants: map[string]int{},
		wake: make(chan struct{}, 1), loopDone: make(chan struct{}),
	}
	e.spec, _ = r.cfg.Speculative.resolve("Speculative") // checked by checkFields
	// Generation ends on every end-of-generation token of the vocabulary
	// (EOS, EOT, <|im_end|>, <end_of_turn>, ...), as llama.cpp does, and on
	// the model's own EOS id.
	for _, id := range append(r.tok.EOG(), r.tok.EOS(), r.weights.Config.EOS) {
		if id >= 0 && !contains(e.eos, id) {
			e.eos = append(e.eos, id)
		}
	}
	// A completed host-tier copy may let a waiting step proceed: the
	// scheduler polls the copy (it never waits on one) when woken.
	e.pool.OnCopyDone(e.signal)
	e.sched = newScheduler(e)
	if e.spec != nil && e.spec.Type == SpecDraft {
		if e.draft, err = openDraftModel(r.cfg, e.mcfg.Vocab); err != nil {
			e.abandon()
			return nil, err
		}
	}
	if err := e.tiers.init(e, r); err != nil {
		e.abandon()
		return nil, err
	}
	go e.sched.loop()
	return e, nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Config returns the resolved configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// ModelConfig is the loaded model's configuration.
func (e *Engine) ModelConfig() model.Config { return e.mcfg }

// Tokenizer is the model's tokenizer.
func (e *Engine) Tokenizer() tokenizer.Tokenizer { return e.tok }

// Device names the backend in use ("cpu").
func (e *Engine) Device() string { return e.backend }

// MaxContext is the resolved MaxContext.
func (e *Engine) MaxContext() int { return e.cfg.MaxContext }

// Submit admits req and returns its stream. Admission (invariant 2) is the
// only gate: the prompt is tokenized and every check runs here, before any
// page is allocated or any compute is queued; a rejected request returns an
// error wrapping ErrEmptyPrompt, ErrPromptTooLong (a *PromptTooLongError),
// ErrInvalidParams, ErrQuotaExceeded, ErrOverloaded or ErrClosed, and never
// reaches the scheduler. Submit may wait for its turn to tokenize while
// other long prompts are (the bytes tokenized at once are bounded).
// Cancelling ctx aborts the request, or ends that wait with ErrAborted.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	e.met.submit()
	if err := checkLogprobs(req); err != nil {
		e.met.reject(RejectInvalidParams)
		return nil, err
	}
	var gs *grammarState
	if req.Grammar != nil {
		var err error
		if gs, err = e.newGrammarState(req.Grammar); err != nil {
			e.met.reject(RejectInvalidParams)
			return nil, err
		}
	}
	spec, err := e.specFor(req)
	if err != nil {
		e.met.reject(RejectInvalidParams)
		return nil, err
	}
	s, err := e.admit(ctx, req)
	if err != nil {
		return nil, err
	}
	s.lp = logprobOptsOf(req)
	s.promptNext = 1 // prompt token 0 has no log-probability
	s.grammar = gs
	s.spec = newSpecSeq(spec)
	if err := ctx.Err(); err != nil {
		e.unadmit(s)
		return nil, fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
	}

	st := newStream(ctx, s.id)
	st.abort = func() { _ = e.abort(s.id, fmt.Errorf("%w: the stream was closed", ErrAborted)) }
	st.prompt = s.prompt
	s.stream = st

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.unadmit(s)
		e.met.reject(RejectClosed)
		return nil, ErrClosed
	}
	e.live[s.id] = s
	// Registered under e.mu, before the scheduler can see s: the callback
	// (which takes e.mu) cannot run before s is live, and st.stop is set
	// before the scheduler can finish the stream.
	st.stop = context.AfterFunc(ctx, func() {
		_ = e.abort(s.id, fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx)))
	})
	e.inbox = append(e.inbox, s)
	e.mu.Unlock()
	e.signal()
	return st, nil
}

// Generate submits req and waits for its Result. The error is the
// admission error, or Result.Err for an aborted or failed request.
func (e *Engine) Generate(ctx context.Context, req Request) (Result, error) {
	st, err := e.Submit(ctx, req)
	if err != nil {
		return Result{FinishReason: "error", Err: err}, err
	}
	r := st.Wait()
	return r, r.Err
}

// Abort ends request id at the next step boundary (invariant 8); its pages
// go through deferred release. It returns ErrNotFound for an unknown or
// already ended request.
func (e *Engine) Abort(id uint64) error {
	return e.abort(id, ErrAborted)
}

func (e *Engine) abort(id uint64, cause error) error {
	e.mu.Lock()
	if _, ok := e.live[id]; !ok {
		e.mu.Unlock()
		return fmt.Errorf("%w: request %d", ErrNotFound, id)
	}
	e.aborts = append(e.aborts, abortMsg{id, cause})
	e.mu.Unlock()
	e.signal()
	return nil
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Stats returns a snapshot of the engine's and the pool's metrics.
func (e *Engine) Stats() Stats {
	st := e.met.snapshot()
	st.Pool = poolStatsOf(e.pool.Stats())
	st.Disk = e.tiers.diskStats()
	return st
}

// Close stops admitting, aborts every request still queued or running (each
// ends with ErrAborted... wrapping ErrClosed), waits for their pages to come
// back through deferred release, then frees the pool and the model. It is
// idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.loopDone
		return e.closeErr
	}
	e.closed = true
	e.mu.Unlock()
	e.signal()
	<-e.loopDone
	err := e.pool.Close()
	e.draft.close()
	e.tiers.close()
	if e.ownW {
		if cerr := e.weights.Close(); err == nil {
			err = cerr
		}
	}
	if c, ok := e.runner.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	e.mu.Lock()
	e.closeErr = err
	e.mu.Unlock()
	return err
}

// ended is called by the scheduler when a request leaves for good.
func (e *Engine) ended(s *seq) {
	e.mu.Lock()
	delete(e.live, s.id)
	if e.tenants[s.tenant]--; e.tenants[s.tenant] <= 0 {
		delete(e.tenants, s.tenant)
	}
	if !s.everScheduled {
		e.queued--
	}
	e.mu.Unlock()
}
